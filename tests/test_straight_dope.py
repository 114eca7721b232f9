"""Code in the style of "The Straight Dope" (the MXNet Gluon book) gives MXNet 1.9.1's numbers
(tests/data/mxnet_straight_dope/straight_dope.npz, recorded from the real MXNet by the same
``straight_dope_cases.record``), and the module paths the book imports exist."""
import importlib

import numpy as np
import pytest

import replay
import trainer_cli as mx

RECORDED, straight_dope_cases = replay.recording("mxnet_straight_dope", "straight_dope.npz",
                                                 "straight_dope_cases")
OURS = straight_dope_cases.record(mx)


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets(name):
    got, want = OURS[name], RECORDED[name]
    if want.dtype.kind in "Uiu":        # a program's printed lines, exit codes: exactly
        np.testing.assert_array_equal(got, want)
        return
    replay.same_layout(got, want)
    # Convolutions and reductions sum in another order than MXNet's: float32 rounding, which a
    # diverging run multiplies step after step (inf and NaN in the same places).
    rtol = 1e-4 if name.startswith("diverging_sgd/") else 1e-5
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-6)


def test_a_diverging_run_overflows_silently_as_in_mxnet():
    # MXNet's backward and update operators give inf and NaN without a word; NumPy's
    # RuntimeWarnings from inside trainer_cli's (NumPy's own reductions in a backward included)
    # are not shown. A warning of the program's own NumPy call still is.
    import os
    import subprocess
    import sys
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_straight_dope")
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import numpy as np, trainer_cli, straight_dope_cases\n"
            "out = {}\n"
            "straight_dope_cases.diverging_sgd(trainer_cli, out)\n"
            "print(int(np.isnan(out['diverging_sgd/weights']).sum()))\n"
            "np.log(np.zeros(1))\n" % here)
    done = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0
    assert done.stderr.count("RuntimeWarning") == 1 and "<string>:6" in done.stderr, done.stderr


def test_contrib_module_paths_are_the_operator_modules():
    # ``from mxnet.contrib.ndarray import MultiBoxPrior``: the path, mx.contrib.nd and
    # mx.nd.contrib are one module, as in MXNet (and the same for symbols).
    by_path = importlib.import_module("trainer_cli.contrib.ndarray")
    assert by_path is mx.contrib.nd is mx.contrib.ndarray is mx.nd.contrib
    from trainer_cli.contrib.ndarray import MultiBoxDetection, MultiBoxPrior, MultiBoxTarget
    assert MultiBoxPrior is mx.nd.contrib.MultiBoxPrior
    assert (MultiBoxTarget, MultiBoxDetection) == (mx.nd.contrib.MultiBoxTarget,
                                                   mx.nd.contrib.MultiBoxDetection)
    sym_path = importlib.import_module("trainer_cli.contrib.symbol")
    assert sym_path is mx.contrib.sym is mx.contrib.symbol is mx.sym.contrib


def test_reshape_operator_to_another_size_raises_where_mxnet_corrupts_memory():
    # The book's tensor chapter folds a (5, 6) product into (4, 3, 2): MXNet 1.9.1's operator
    # (its size check compiled out) returns 24 of the 30 values, and a larger target reads past
    # the input (a crash later). Here both raise ShapeError, as the method x.reshape() does.
    from trainer_cli.base import MXNetError, ShapeError
    a = mx.nd.arange(30).reshape((5, 6))
    for target in ((4, 3, 2), (4, 4, 2), (4, -1, 7)):
        with pytest.raises(ShapeError, match="cannot make shape"):
            mx.nd.reshape(a, target)
        with pytest.raises(MXNetError):
            mx.nd.Reshape(a, shape=target)
    assert mx.nd.reshape(a, (3, -1, 2)).shape == (3, 5, 2)
