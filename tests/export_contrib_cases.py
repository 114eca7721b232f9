"""Networks whose hybrid_forward calls MXNet's contrib operators (``F.contrib.*``, as GluonCV and
GluonNLP write them), shared by their golden-data generator (run with real MXNet 1.9.1,
tests/data/hybrid_export/make_contrib_golden.py) and tests/test_hybrid_export_contrib.py. Each
network is built from the ``mx`` module it is given (``mxnet`` or ``trainer_cli``), so both
build the same blocks with the same names; weights are seeded by the parameter's name
(export_cases.weight)."""
import zlib

import numpy as np

from export_cases import data, set_weights  # noqa: F401 - set_weights: the generator's and tests'


def _boxes(name, shape, extra=0):
    """Boxes (corner format, x1 < x2, y1 < y2 in [0, 1]) of ``shape[:-1]``, with ``extra``
    columns before the 4 coordinates (an id in [0, 3) and a score in (0, 1))."""
    rng = np.random.RandomState(zlib.crc32(("boxes:" + name).encode()))
    lead = shape[:-1]
    centre = rng.uniform(0.2, 0.8, size=lead + (2,))
    half = rng.uniform(0.05, 0.3, size=lead + (2,))
    corners = np.concatenate([centre - half, centre + half], axis=-1)
    columns = []
    if extra >= 1:
        columns.append(rng.randint(0, 3, size=lead + (1,)).astype(np.float64))
    if extra >= 2:
        columns.append(rng.uniform(0.05, 1.0, size=lead + (1,)))
    return np.concatenate(columns + [corners], axis=-1).astype(np.float32)


def _blocks(mx):
    gluon, nn = mx.gluon, mx.gluon.nn

    class SSDHead(gluon.HybridBlock):
        """An SSD head on one feature map: anchors (MultiBoxPrior), class and box predictions
        (convolutions), decoded and suppressed detections (MultiBoxDetection)."""

        def __init__(self, classes=3, **kwargs):
            super().__init__(**kwargs)
            self._classes = classes
            with self.name_scope():
                self.body = nn.Conv2D(4, 3, padding=1, activation="relu")
                self.cls = nn.Conv2D(3 * (classes + 1), 3, padding=1)
                self.loc = nn.Conv2D(3 * 4, 3, padding=1)

        def hybrid_forward(self, F, x):
            feat = self.body(x)
            anchors = F.contrib.MultiBoxPrior(feat, sizes=[0.3, 0.6], ratios=[1, 2],
                                              steps=(0.25, 0.25), clip=True)
            cls = F.transpose(self.cls(feat), axes=(0, 2, 3, 1)).reshape((0, -1, self._classes + 1))
            cls_prob = F.softmax(F.transpose(cls, axes=(0, 2, 1)), axis=1)
            loc = F.transpose(self.loc(feat), axes=(0, 2, 3, 1)).reshape((0, -1))
            det = F.contrib.MultiBoxDetection(cls_prob, loc, anchors, threshold=0.2,
                                              nms_threshold=0.45, nms_topk=12,
                                              variances=(0.1, 0.1, 0.2, 0.2))
            return anchors, det

    class SSDTarget(gluon.HybridBlock):
        """SSD's training targets: MultiBoxTarget's three outputs from anchors, labels and
        class predictions."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.cls = nn.Conv2D(2 * 3, 1)

        def hybrid_forward(self, F, x, label):
            anchors = F.contrib.MultiBoxPrior(x, sizes=(0.4, 0.2), ratios=(1.0,))
            cls_pred = self.cls(x).reshape((0, 3, -1))
            loc_target, loc_mask, cls_target = F.contrib.MultiBoxTarget(
                anchors, label, cls_pred, overlap_threshold=0.3, negative_mining_ratio=2,
                negative_mining_thresh=0.3, variances=(0.1, 0.1, 0.2, 0.2))
            return F.concat(loc_target, loc_mask, cls_target, dim=1)

    class SegHead(gluon.HybridBlock):
        """A PSPNet-like head: pyramid pooling (AdaptiveAvgPooling2D), upsampling back
        (BilinearResize2D, sizes and ``like``) and a fixed-size upsampled output."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.conv = nn.Conv2D(4, 3, padding=1, activation="relu")
                self.bn = nn.BatchNormReLU()
                self.proj = nn.Conv2D(2, 1)

        def hybrid_forward(self, F, x):
            feat = self.bn(self.conv(x))
            pooled = F.contrib.AdaptiveAvgPooling2D(feat, output_size=2)
            pooled3 = F.contrib.AdaptiveAvgPooling2D(feat, output_size=(3, 2))
            up = F.contrib.BilinearResize2D(pooled, like=feat, mode="like")
            up3 = F.contrib.BilinearResize2D(pooled3, height=5, width=6, align_corners=False)
            out = self.proj(F.concat(feat, up, up3, dim=1))
            return F.contrib.BilinearResize2D(out, scale_height=2.0, scale_width=1.5,
                                              mode="odd_scale")

    class Detections(gluon.HybridBlock):
        """Post-processing of predicted boxes (B, N, 6: id, score, 4 corners): box_nms (and its
        other name), box_iou, box_decode, bipartite_matching (two outputs, one used)."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.dense = nn.Dense(4, flatten=False)

        def hybrid_forward(self, F, x):
            nms = F.contrib.box_nms(x, overlap_thresh=0.3, valid_thresh=0.1, topk=6, id_index=0,
                                    score_index=1, coord_start=2, force_suppress=False)
            nms2 = F.contrib.box_non_maximum_suppression(x, 0.5, 0.0, -1, 2, 1, -1, -1, True)
            boxes = F.slice_axis(x, axis=-1, begin=2, end=6)
            iou = F.contrib.box_iou(boxes, boxes, format="corner")
            match, _ = F.contrib.bipartite_matching(F.reshape(iou, (-3, -1)), threshold=0.05,
                                                    is_ascend=False)
            deltas = F.tanh(self.dense(boxes)) * 0.5
            decoded = F.contrib.box_decode(deltas, F.slice_axis(boxes, axis=0, begin=0, end=1),
                                           std0=0.1, std1=0.1, std2=0.2, std3=0.2, clip=2.0,
                                           format="corner")
            return nms, nms2, match, decoded

    class Attention(gluon.HybridBlock):
        """Fused multi-head attention as GluonNLP writes it: interleaved projections, the
        interleaved products (self and encoder-decoder), plus contrib's small elementwise ops."""

        def __init__(self, heads=2, units=4, **kwargs):
            super().__init__(**kwargs)
            self._heads = heads
            with self.name_scope():
                self.qkv = nn.Dense(3 * heads * units, flatten=False)
                self.q = nn.Dense(heads * units, flatten=False)
                self.kv = nn.Dense(2 * heads * units, flatten=False)

        def hybrid_forward(self, F, x):
            qkv = self.qkv(x)
            scores = F.contrib.interleaved_matmul_selfatt_qk(qkv, heads=self._heads)
            att = F.softmax(scores, axis=-1)
            ctx = F.contrib.interleaved_matmul_selfatt_valatt(qkv, att, heads=self._heads)
            q, kv = self.q(ctx), self.kv(x)
            scores2 = F.contrib.interleaved_matmul_encdec_qk(q, kv, heads=self._heads)
            att2 = F.softmax(F.contrib.div_sqrt_dim(scores2), axis=-1)
            out = F.contrib.interleaved_matmul_encdec_valatt(kv, att2, heads=self._heads)
            pos = F.contrib.arange_like(out, start=1.0, step=0.5, axis=0)
            out = F.broadcast_add(out, F.reshape(pos, (-1, 1, 1)))
            out = F.contrib.quadratic(out, a=0.5, b=-1.0, c=0.25)
            out = F.contrib.gradientmultiplier(out, scalar=-1.0)
            return F.concat(out, F.contrib.round_ste(out * 3), F.contrib.sign_ste(out), dim=-1)

    class RoiHead(gluon.HybridBlock):
        """Two-stage detector heads on a feature map and ROIs (batch index, x1, y1, x2, y2):
        ROIAlign, ROIPooling and PSROIPooling."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.feat = nn.Conv2D(8, 3, padding=1)

        def hybrid_forward(self, F, x, rois):
            feat = self.feat(x)
            a = F.contrib.ROIAlign(feat, rois, pooled_size=(2, 2), spatial_scale=0.5,
                                   sample_ratio=2)
            b = F.contrib.ROIAlign(feat, rois, (2, 2), 0.5, -1, False, True)
            c = F.ROIPooling(feat, rois, pooled_size=(2, 2), spatial_scale=0.5)
            d = F.contrib.PSROIPooling(feat, rois, spatial_scale=0.5, output_dim=2, pooled_size=2)
            return F.concat(a, b, c, F.tile(d, reps=(1, 4, 1, 1)), dim=1)

    class Indexing(gluon.HybridBlock):
        """Operators of data-dependent shape or integer outputs: boolean_mask (the rows of
        positive sum), index_array, index_copy."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.dense = nn.Dense(3, flatten=False, in_units=4)

        def hybrid_forward(self, F, x):
            y = self.dense(x)
            kept = F.contrib.boolean_mask(y, F.relu(F.sign(F.sum(x, axis=1))))
            where = F.contrib.index_array(y, axes=(1,))
            rows = F.cast(F.slice_axis(F.contrib.arange_like(y, axis=0, start=1, step=2),
                                       axis=0, begin=0, end=2), "int64")
            copied = F.contrib.index_copy(y, rows, F.slice_axis(y, axis=0, begin=0, end=2) * 10)
            return kept, where, copied

    return SSDHead, SSDTarget, SegHead, Detections, Attention, RoiHead, Indexing


def build(name, mx):
    """The network of case ``name`` built with the module ``mx``, and its inputs (a tuple)."""
    nn = mx.gluon.nn
    SSDHead, SSDTarget, SegHead, Detections, Attention, RoiHead, Indexing = _blocks(mx)
    prefix = name + "_"
    if name == "ssd_head":
        net = SSDHead(prefix=prefix)
        inputs = (data(name, (2, 3, 4, 4)),)
    elif name == "ssd_target":
        net = SSDTarget(prefix=prefix)
        label = np.full((2, 3, 5), -1, np.float32)
        label[0, :2, 0] = (0, 1)
        label[0, :2, 1:] = ((0.1, 0.1, 0.5, 0.6), (0.5, 0.4, 0.9, 0.95))
        label[1, 0] = (1, 0.3, 0.2, 0.7, 0.6)
        inputs = (data(name, (2, 3, 3, 3)), label)
    elif name == "seg_head":
        net = SegHead(prefix=prefix)
        inputs = (data(name, (2, 3, 5, 6)),)
    elif name == "detections":
        net = Detections(prefix=prefix)
        inputs = (_boxes(name, (2, 8, 4), extra=2),)
    elif name == "attention":
        net = Attention(prefix=prefix)
        inputs = (data(name, (3, 2, 5)),)
    elif name == "roi_head":
        net = RoiHead(prefix=prefix)
        rois = np.array([[0, 0, 0, 5, 5], [1, 1.5, 2, 7, 6], [0, 3.2, 1.1, 6.6, 7.9]], np.float32)
        inputs = (data(name, (2, 3, 8, 8)), rois)
    elif name == "indexing":
        net = Indexing(prefix=prefix)
        inputs = (data(name, (5, 4)),)
    elif name == "bn_relu":
        net = nn.HybridSequential(prefix=prefix)
        with net.name_scope():
            net.add(nn.Conv2D(4, 3, padding=1), nn.BatchNormReLU(),
                    nn.Conv2D(3, 1), nn.BatchNormReLU(scale=False, momentum=0.8, epsilon=1e-3),
                    nn.BatchNormReLU(use_global_stats=True), nn.GlobalAvgPool2D())
        inputs = (data(name, (2, 3, 5, 5)),)
    elif name == "deformable":
        cnn = mx.gluon.contrib.cnn
        net = nn.HybridSequential(prefix=prefix)
        with net.name_scope():
            net.add(cnn.DeformableConvolution(4, 3, padding=1, activation="relu"),
                    cnn.DeformableConvolution(3, (3, 2), strides=(1, 2), use_bias=False,
                                              offset_use_bias=False, num_deformable_group=1),
                    cnn.ModulatedDeformableConvolution(2, 3, padding=1),
                    cnn.ModulatedDeformableConvolution(2, 1, use_bias=False,
                                                       activation="tanh"))
        inputs = (data(name, (2, 3, 6, 6)),)
    else:
        raise KeyError(name)
    return net, inputs


CASES = ("ssd_head", "ssd_target", "seg_head", "detections", "attention", "roi_head",
         "indexing", "bn_relu", "deformable")


def input_names(inputs):
    """MXNet's names of a hybridized block's inputs: ``data``, or data0, data1, ..."""
    return ["data"] if len(inputs) == 1 else ["data%d" % i for i in range(len(inputs))]
