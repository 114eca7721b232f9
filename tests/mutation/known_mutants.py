"""Apply, one at a time, the formula mistakes the suite once let through, run the given tests
and say whether each was killed (the tests failed) or survived:

    python tests/mutation/known_mutants.py tests/test_golden_regimes.py tests/test_optimizer.py

Each mutant is an exact text replacement in a source file, restored afterwards (also on Ctrl-C).
Run it from a clean checkout: it edits the files in place while it runs.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUTANTS = [
 ("adagrad eps outside sqrt (NumPy body)", "trainer_cli/optimizer/adagrad.py",
  "    div = history + eps\n    xp.sqrt(div, out=div)\n", "    div = xp.sqrt(history) + eps\n"),
 ("adagrad eps outside sqrt (row kernel)", "trainer_cli/optimizer/adagrad.py",
  "        d = G / numpy.sqrt(h + eps)\n", "        d = G / (numpy.sqrt(h) + eps)\n"),
 ("wd_mult ignored on the Trainer path", "trainer_cli/optimizer/optimizer.py",
  "                return [p.lr_mult for p in chosen], [p.wd_mult for p in chosen]\n",
  "                return [p.lr_mult for p in chosen], [1.0 for p in chosen]\n"),
 ("clip_global_norm eps 1e-6", "trainer_cli/gluon/utils.py",
  "(total_norm + dtype.type(1e-8))", "(total_norm + dtype.type(1e-6))"),
 ("sgd cache keyed on value only", "trainer_cli/optimizer/sgd.py",
  "key = (t, lr, rescale, _copysign(1.0, lr), _copysign(1.0, rescale))", "key = (t, lr, rescale)"),
 ("sgd no-momentum zero signs (NumPy body)", "trainer_cli/optimizer/sgd.py",
  "        decayed = w * lr_wd\n        xp.subtract(t(0), decayed, out=decayed)\n"
  "        decayed -= step\n        w += decayed\n",
  "        step += w * lr_wd\n        w -= step\n"),
 ("sgd no-momentum rewrite taken for a negative lr*wd", "trainer_cli/optimizer/sgd.py",
  "        if _copysign(1.0, lr_wd) > 0:\n", "        if True:\n"),
 ("sgd decay term skipped at wd=0 (NumPy body)", "trainer_cli/optimizer/sgd.py",
  "            decayed = w * -lr_wd\n",
  "            if not wd:\n                w -= step\n                return\n"
  "            decayed = w * -lr_wd\n"),
 ("adagrad clip_gradient ignored on row_sparse steps", "trainer_cli/optimizer/adagrad.py",
  "wd=0.0, eps=self.float_stable_eps,\n                          rescale=self.rescale_grad, clip=self._clip)",
  "wd=0.0, eps=self.float_stable_eps,\n                          rescale=self.rescale_grad, clip=None)"),
 ("nag without momentum on SGD's multi-tensor form", "trainer_cli/optimizer/nag.py",
  "clip=self._clip, single=True)", "clip=self._clip)"),
 ("PolyScheduler's default power 3", "trainer_cli/lr_scheduler.py",
  "pwr=2, final_lr=0", "pwr=3, final_lr=0"),
 # From here on each mutant names the tests that kill it (they are not in the default list).
 ("GradientCompression == on type or threshold", "trainer_cli/kvstore/compression.py",
  "self._type == other._type and self._thr32", "self._type == other._type or self._thr32",
  ["tests/test_compression.py"]),
 ("GradientCompression.quantize drops out=", "trainer_cli/kvstore/compression.py",
  "return quantize_2bit(grad, residual, self._thr32, out=out)",
  "return quantize_2bit(grad, residual, self._thr32)", ["tests/test_compression.py"]),
 ("dequantize_2bit takes a threshold <= 0", "trainer_cli/kvstore/compression.py",
  "    thr = _float32_threshold(threshold, positive=True)\n    return _decode(",
  "    thr = _float32_threshold(threshold, positive=False)\n    return _decode(",
  ["tests/test_compression.py"]),
 ("softmax CE picks without keepdims", "trainer_cli/ndarray/losses.py",
  '_pick_raw(logp, label, axis, True, "clip")', '_pick_raw(logp, label, axis, False, "clip")',
  ["tests/test_gluon_loss.py"]),
]
tests = sys.argv[1:] or ["tests/test_golden_regimes.py", "tests/test_optimizer.py"]
survivors = 0
for what, path, old, new, *own_tests in MUTANTS:
    full = os.path.join(ROOT, path)
    src = open(full).read()
    assert src.count(old) == 1, "%s: the text to replace is no longer in %s" % (what, path)
    open(full, "w").write(src.replace(old, new))
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly",
                            "-p", "no:cacheprovider"] + (own_tests[0] if own_tests else tests),
                           cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT))
    finally:
        open(full, "w").write(src)
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-200:]
    failed = [l for l in r.stdout.splitlines() if l.startswith("FAILED")]
    killed = r.returncode == 1
    survivors += not killed
    print("%-45s %s  %s" % (what, "KILLED" if killed else "SURVIVED rc=%d" % r.returncode,
                            failed[:1] or last))
sys.exit(1 if survivors else 0)
