"""The pre-trained embedding files MXNet 1.9.1 knows by name (``mxnet.contrib.text._constants``),
in its order. Only the names: nothing is downloaded here, the files are read where MXNet keeps
them."""

GLOVE_FILES = (
    'glove.42B.300d.txt',
    'glove.6B.50d.txt',
    'glove.6B.100d.txt',
    'glove.6B.200d.txt',
    'glove.6B.300d.txt',
    'glove.840B.300d.txt',
    'glove.twitter.27B.25d.txt',
    'glove.twitter.27B.50d.txt',
    'glove.twitter.27B.100d.txt',
    'glove.twitter.27B.200d.txt',
)

FASTTEXT_FILES = tuple("""
crawl-300d-2M.vec wiki.aa.vec wiki.ab.vec wiki.ace.vec wiki.ady.vec wiki.af.vec wiki.ak.vec
wiki.als.vec wiki.am.vec wiki.ang.vec wiki.an.vec wiki.arc.vec wiki.ar.vec wiki.arz.vec
wiki.ast.vec wiki.as.vec wiki.av.vec wiki.ay.vec wiki.azb.vec wiki.az.vec wiki.bar.vec
wiki.bat_smg.vec wiki.ba.vec wiki.bcl.vec wiki.be.vec wiki.bg.vec wiki.bh.vec wiki.bi.vec
wiki.bjn.vec wiki.bm.vec wiki.bn.vec wiki.bo.vec wiki.bpy.vec wiki.br.vec wiki.bs.vec
wiki.bug.vec wiki.bxr.vec wiki.ca.vec wiki.cbk_zam.vec wiki.cdo.vec wiki.ceb.vec wiki.ce.vec
wiki.cho.vec wiki.chr.vec wiki.ch.vec wiki.chy.vec wiki.ckb.vec wiki.co.vec wiki.crh.vec
wiki.cr.vec wiki.csb.vec wiki.cs.vec wiki.cu.vec wiki.cv.vec wiki.cy.vec wiki.da.vec wiki.de.vec
wiki.diq.vec wiki.dsb.vec wiki.dv.vec wiki.dz.vec wiki.ee.vec wiki.el.vec wiki.eml.vec
wiki.en.vec wiki.eo.vec wiki.es.vec wiki.et.vec wiki.eu.vec wiki.ext.vec wiki.fa.vec wiki.ff.vec
wiki.fiu_vro.vec wiki.fi.vec wiki.fj.vec wiki.fo.vec wiki.frp.vec wiki.frr.vec wiki.fr.vec
wiki.fur.vec wiki.fy.vec wiki.gag.vec wiki.gan.vec wiki.ga.vec wiki.gd.vec wiki.glk.vec
wiki.gl.vec wiki.gn.vec wiki.gom.vec wiki.got.vec wiki.gu.vec wiki.gv.vec wiki.hak.vec
wiki.ha.vec wiki.haw.vec wiki.he.vec wiki.hif.vec wiki.hi.vec wiki.ho.vec wiki.hr.vec
wiki.hsb.vec wiki.ht.vec wiki.hu.vec wiki.hy.vec wiki.hz.vec wiki.ia.vec wiki.id.vec wiki.ie.vec
wiki.ig.vec wiki.ii.vec wiki.ik.vec wiki.ilo.vec wiki.io.vec wiki.is.vec wiki.it.vec wiki.iu.vec
wiki.jam.vec wiki.ja.vec wiki.jbo.vec wiki.jv.vec wiki.kaa.vec wiki.kab.vec wiki.ka.vec
wiki.kbd.vec wiki.kg.vec wiki.ki.vec wiki.kj.vec wiki.kk.vec wiki.kl.vec wiki.km.vec wiki.kn.vec
wiki.koi.vec wiki.ko.vec wiki.krc.vec wiki.kr.vec wiki.ksh.vec wiki.ks.vec wiki.ku.vec
wiki.kv.vec wiki.kw.vec wiki.ky.vec wiki.lad.vec wiki.la.vec wiki.lbe.vec wiki.lb.vec
wiki.lez.vec wiki.lg.vec wiki.lij.vec wiki.li.vec wiki.lmo.vec wiki.ln.vec wiki.lo.vec
wiki.lrc.vec wiki.ltg.vec wiki.lt.vec wiki.lv.vec wiki.mai.vec wiki.map_bms.vec wiki.mdf.vec
wiki.mg.vec wiki.mhr.vec wiki.mh.vec wiki.min.vec wiki.mi.vec wiki.mk.vec wiki.ml.vec
wiki.mn.vec wiki.mo.vec wiki.mrj.vec wiki.mr.vec wiki.ms.vec wiki.mt.vec wiki.multi.ar.vec
wiki.multi.bg.vec wiki.multi.ca.vec wiki.multi.cs.vec wiki.multi.da.vec wiki.multi.de.vec
wiki.multi.el.vec wiki.multi.en.vec wiki.multi.es.vec wiki.multi.et.vec wiki.multi.fi.vec
wiki.multi.fr.vec wiki.multi.he.vec wiki.multi.hr.vec wiki.multi.hu.vec wiki.multi.id.vec
wiki.multi.it.vec wiki.multi.mk.vec wiki.multi.nl.vec wiki.multi.no.vec wiki.multi.pl.vec
wiki.multi.pt.vec wiki.multi.ro.vec wiki.multi.ru.vec wiki.multi.sk.vec wiki.multi.sl.vec
wiki.multi.sv.vec wiki.multi.tr.vec wiki.multi.uk.vec wiki.multi.vi.vec wiki.mus.vec
wiki.mwl.vec wiki.my.vec wiki.myv.vec wiki.mzn.vec wiki.nah.vec wiki.nap.vec wiki.na.vec
wiki.nds_nl.vec wiki.nds.vec wiki.ne.vec wiki-news-300d-1M-subword.vec wiki-news-300d-1M.vec
wiki.new.vec wiki.ng.vec wiki.nl.vec wiki.nn.vec wiki.no.vec wiki.nov.vec wiki.nrm.vec
wiki.nso.vec wiki.nv.vec wiki.ny.vec wiki.oc.vec wiki.olo.vec wiki.om.vec wiki.or.vec
wiki.os.vec wiki.pag.vec wiki.pam.vec wiki.pap.vec wiki.pa.vec wiki.pcd.vec wiki.pdc.vec
wiki.pfl.vec wiki.pih.vec wiki.pi.vec wiki.pl.vec wiki.pms.vec wiki.pnb.vec wiki.pnt.vec
wiki.ps.vec wiki.pt.vec wiki.qu.vec wiki.rm.vec wiki.rmy.vec wiki.rn.vec wiki.roa_rup.vec
wiki.roa_tara.vec wiki.ro.vec wiki.rue.vec wiki.ru.vec wiki.rw.vec wiki.sah.vec wiki.sa.vec
wiki.scn.vec wiki.sco.vec wiki.sc.vec wiki.sd.vec wiki.se.vec wiki.sg.vec wiki.sh.vec
wiki.simple.vec wiki.si.vec wiki.sk.vec wiki.sl.vec wiki.sm.vec wiki.sn.vec wiki.so.vec
wiki.sq.vec wiki.srn.vec wiki.sr.vec wiki.ss.vec wiki.stq.vec wiki.st.vec wiki.su.vec
wiki.sv.vec wiki.sw.vec wiki.szl.vec wiki.ta.vec wiki.tcy.vec wiki.tet.vec wiki.te.vec
wiki.tg.vec wiki.th.vec wiki.ti.vec wiki.tk.vec wiki.tl.vec wiki.tn.vec wiki.to.vec wiki.tpi.vec
wiki.tr.vec wiki.ts.vec wiki.tt.vec wiki.tum.vec wiki.tw.vec wiki.ty.vec wiki.tyv.vec
wiki.udm.vec wiki.ug.vec wiki.uk.vec wiki.ur.vec wiki.uz.vec wiki.vec.vec wiki.vep.vec
wiki.ve.vec wiki.vi.vec wiki.vls.vec wiki.vo.vec wiki.war.vec wiki.wa.vec wiki.wo.vec
wiki.wuu.vec wiki.xal.vec wiki.xh.vec wiki.xmf.vec wiki.yi.vec wiki.yo.vec wiki.za.vec
wiki.zea.vec wiki.zh_classical.vec wiki.zh_min_nan.vec wiki.zh.vec wiki.zh_yue.vec wiki.zu.vec
""".split())
