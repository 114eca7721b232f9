"""Every NDArray method of an operator takes MXNet's ``out=`` (``x.sigmoid(out=x)``, as MXNet
programs write), writing the method's own result into ``out``; and the fluent methods MXNet
has for the operators outside the core module exist."""
import numpy as np
import pytest

from trainer_cli import nd
from trainer_cli.ndarray import ops

# The arguments a method needs beyond the array (the others take none).
ARGS = {
    "clip": (-0.5, 0.5), "expand_dims": (0,), "swapaxes": (0, 1), "flip": (0,),
    "broadcast_to": ((2, 2, 3),), "tile": ((2,),), "repeat": (2,), "split": (3,),
    "pick": (nd.array([0, 2]),), "take": (nd.array([1, 0]),), "one_hot": (4,),
    "slice_axis": (1, 0, 2), "reshape_like": (nd.zeros((3, 2)),), "dot": (nd.ones((3, 2)),),
    "broadcast_like": (nd.zeros((2, 2, 3)),), "broadcast_axes": (), "broadcast_axis": (),
    "slice": ((0, 1), (2, 3)), "squeeze": (),
}
KWARGS = {"split": {"num_outputs": 3, "axis": 1}}
SKIP = {"broadcast_axes", "broadcast_axis", "squeeze", "split"}   # need singleton axes / lists


@pytest.mark.parametrize("name", sorted(set(ops._METHODS) - SKIP))
def test_each_method_writes_into_out(name):
    x = nd.array(np.linspace(0.1, 0.9, 6).reshape(2, 3) + (1.0 if name == "arccosh" else 0.0))
    args, kwargs = ARGS.get(name, ()), KWARGS.get(name, {})
    want = getattr(x, name)(*args, **kwargs)
    out = nd.zeros(want.shape, dtype=want.dtype)
    assert getattr(x, name)(*args, out=out, **kwargs) is out
    np.testing.assert_array_equal(out.asnumpy(), want.asnumpy())


def test_in_place_as_mxnet_programs_write_it():
    prob = nd.array([[0.0, 2.0], [-1.0, 1.0]])
    assert prob.sigmoid(out=prob) is prob
    np.testing.assert_allclose(prob.asnumpy(), 1 / (1 + np.exp(-np.array([[0.0, 2.0],
                                                                           [-1.0, 1.0]]))),
                               rtol=1e-6)


def test_fluent_methods_of_the_other_operators():
    x = nd.arange(16).reshape((1, 4, 2, 2))
    out = nd.zeros((1, 1, 4, 4))
    assert x.depth_to_space(2, out=out) is out
    np.testing.assert_array_equal(out.space_to_depth(2).asnumpy(), x.asnumpy())
    assert nd.array([[1, 5, 2], [7, 0, 3]]).argmax_channel().asnumpy().tolist() == [1, 0]
    assert nd.array([[1, 2], [3, 4]]).diag().asnumpy().tolist() == [1, 4]
    assert nd.ones((3, 4)).slice_like(nd.zeros((2, 2))).shape == (2, 2)
    padded = nd.ones((1, 1, 2, 2)).pad(mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))
    assert padded.shape == (1, 1, 4, 4) and padded.asnumpy().sum() == 4
