"""``gluon.contrib.rnn``: the convolutional cells and ``LSTMPCell`` give MXNet 1.9.1's outputs,
states and gradients (tests/data/mxnet_contrib_rnn, recorded from the real MXNet by the same
``contrib_rnn_cases.record``; to float rounding: the products run in another BLAS), MXNet's
parameter names and state shapes, and ``VariationalDropoutCell`` one mask per sequence."""
import os
import sys

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd
from trainer_cli.gluon.contrib import rnn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "mxnet_contrib_rnn"))
import contrib_rnn_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "data", "mxnet_contrib_rnn", "records.npz")))
OURS = contrib_rnn_cases.record(mx)


def test_every_recorded_array_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets_to_float_rounding(name):
    want = RECORDED[name]
    assert OURS[name].shape == want.shape and OURS[name].dtype == want.dtype
    np.testing.assert_allclose(OURS[name], want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_names_shapes_and_states_are_mxnets():
    cell = rnn.Conv2DLSTMCell((3, 8, 8), 4, 3, 3, prefix="c_")
    assert sorted(cell.collect_params()) == ["c_h2h_bias", "c_h2h_weight", "c_i2h_bias",
                                              "c_i2h_weight"]
    assert cell.i2h_weight.shape == (16, 3, 3, 3) and cell.h2h_weight.shape == (16, 4, 3, 3)
    assert cell.state_info(2) == [{"shape": (2, 4, 6, 6), "__layout__": "NCHW"}] * 2
    gru = rnn.Conv2DGRUCell((3, 8, 8), 4, (3, 3), (5, 5), i2h_pad=(1, 1), h2h_dilate=(2, 2))
    assert gru.state_info(1) == [{"shape": (1, 4, 8, 8), "__layout__": "NCHW"}]
    assert rnn.VariationalDropoutCell(rnn.LSTMPCell(5, 3, prefix="p_")).prefix == "p_vardrop"
    assert repr(rnn.LSTMPCell(5, 3, input_size=7)) == "LSTMPCell(7 -> 20 -> 3)"


def test_a_step_by_hand_is_a_convolution_rnn():
    cell = rnn.Conv1DRNNCell((2, 5), 3, 3, 3, i2h_pad=1, activation="relu", prefix="r_")
    cell.initialize(mx.init.Uniform(0.5))
    x, h = nd.random.normal(shape=(1, 2, 5)), nd.random.normal(shape=(1, 3, 5))
    out, states = cell(x, [h])
    p = {k[len("r_"):]: v.data() for k, v in cell.collect_params().items()}
    want = nd.relu(nd.Convolution(x, p["i2h_weight"], p["i2h_bias"], kernel=(3,), pad=(1,),
                                  num_filter=3)
                   + nd.Convolution(h, p["h2h_weight"], p["h2h_bias"], kernel=(3,), pad=(1,),
                                    num_filter=3))
    np.testing.assert_allclose(out.asnumpy(), want.asnumpy(), rtol=1e-6, atol=1e-7)
    assert states[0] is out


def test_a_leaky_relu_activation_unrolls():
    """(MXNet's unroll fails here: its reset() calls reset on the LeakyReLU block.)"""
    cell = rnn.Conv1DGRUCell((2, 7), 3, 3, 3, activation=gluon.nn.LeakyReLU(0.1))
    cell.initialize()
    outputs, states = cell.unroll(4, nd.ones((2, 4, 2, 7)), merge_outputs=True)
    assert outputs.shape == (2, 4, 3, 5) and states[0].shape == (2, 3, 5)


def test_variational_dropout_keeps_one_mask_per_sequence():
    base = rnn.LSTMPCell(8, 8, input_size=8)
    cell = rnn.VariationalDropoutCell(base, drop_inputs=0.5, drop_outputs=0.5)
    cell.initialize(mx.init.One())
    with autograd.record(train_mode=True):
        outputs, _ = cell.unroll(5, nd.ones((4, 5, 8)), merge_outputs=True)
    dropped = outputs.asnumpy() == 0
    assert dropped.any() and not dropped.all()
    assert (dropped == dropped[:, :1, :]).all()     # the same units at every step
    with autograd.record(train_mode=True):           # a new sequence: new masks
        again, _ = cell.unroll(5, nd.ones((4, 5, 8)), merge_outputs=True)
    assert ((again.asnumpy() == 0) != dropped).any()
    # Stepped one step at a time (state dropout takes this path), the masks hold too.
    stepped = rnn.VariationalDropoutCell(rnn.LSTMPCell(8, 8, input_size=8), drop_states=0.5,
                                         drop_outputs=0.5)
    stepped.initialize(mx.init.One())
    with autograd.record(train_mode=True):
        outputs, _ = stepped.unroll(5, nd.ones((4, 5, 8)), merge_outputs=True)
    dropped = outputs.asnumpy() == 0
    assert (dropped == dropped[:, :1, :]).all()


def test_refusals():
    with pytest.raises(ValueError, match="odd"):
        rnn.Conv2DRNNCell((2, 5, 5), 3, 3, 2)
    with pytest.raises(ValueError, match="length 2"):
        rnn.Conv2DRNNCell((2, 5, 5), 3, (3, 3, 3), 3)
    with pytest.raises(ValueError, match="conv_layout must be 'NCHW' or 'NHWC'"):
        rnn.Conv2DLSTMCell((5, 5, 2), 3, 3, 3, conv_layout="NCW")
    bidirectional = gluon.rnn.BidirectionalCell(gluon.rnn.LSTMCell(3), gluon.rnn.LSTMCell(3))
    with pytest.raises(ValueError, match="state dropout"):
        rnn.VariationalDropoutCell(bidirectional, drop_states=0.5)


def test_hybridized_cells_give_the_same_values():
    cell = rnn.Conv2DLSTMCell((2, 5, 6), 3, 3, 3, i2h_pad=1)
    cell.initialize()
    x = nd.random.normal(shape=(2, 2, 5, 6))
    states = cell.begin_state(batch_size=2)
    out, _ = cell(x, states)
    cell.hybridize()
    again, _ = cell(x, cell.begin_state(batch_size=2))
    np.testing.assert_array_equal(out.asnumpy(), again.asnumpy())


@pytest.mark.parametrize("make, first, last", [
    (rnn.Conv2DLSTMCell, "NCHW", "NHWC"), (rnn.Conv1DGRUCell, "NCW", "NWC"),
    (rnn.Conv3DRNNCell, "NCDHW", "NDHWC")])
def test_a_channels_last_cell_is_the_channels_first_cell_transposed(make, first, last):
    """(MXNet keeps such a cell's weights as (rows, *kernel, in); its CPU runs the forward
    pass and not the backward one.)"""
    dims = len(first) - 2
    spatial = (5, 6, 4)[:dims]
    to_last = (0,) + tuple(range(2, dims + 2)) + (1,)
    a = make((2,) + spatial, 3, 3, 3, i2h_pad=1, conv_layout=first, prefix="a_")
    b = make(spatial + (2,), 3, 3, 3, i2h_pad=1, conv_layout=last, prefix="b_")
    a.initialize(mx.init.Uniform(0.5))
    b.initialize()
    for name in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias"):
        value = a.collect_params()["a_" + name].data()
        b.collect_params()["b_" + name].set_data(value.transpose(to_last) if value.ndim > 1
                                                 else value)
    x = nd.random.normal(shape=(2, 4, 2) + spatial)
    xa, xb = x.copy(), nd.transpose(x, axes=(0, 1) + tuple(range(3, dims + 3)) + (2,))
    xa.attach_grad()
    xb.attach_grad()
    with autograd.record():
        out_a, states_a = a.unroll(4, xa, merge_outputs=True)
        out_b, states_b = b.unroll(4, xb, merge_outputs=True)
        (out_a.sum() + states_a[-1].sum()).backward()
        (out_b.sum() + states_b[-1].sum()).backward()
    moved = (0, 1) + tuple(range(3, dims + 3)) + (2,)
    np.testing.assert_array_equal(out_b.asnumpy(), out_a.asnumpy().transpose(moved))
    np.testing.assert_array_equal(xb.grad.asnumpy(), xa.grad.asnumpy().transpose(moved))
    assert b.state_info(2)[0]["shape"] == (2,) + spatial + (3,)


UNROLLED = dict(np.load(os.path.join(HERE, "data", "mxnet_contrib_rnn", "dynamic_unroll.npz")))
OURS_UNROLLED = contrib_rnn_cases.record_dynamic_unroll(mx)


@pytest.mark.parametrize("name", sorted(UNROLLED))
def test_dynamic_unroll_is_mxnets_to_float_rounding(name):
    assert sorted(OURS_UNROLLED) == sorted(UNROLLED)
    want = UNROLLED[name]
    assert OURS_UNROLLED[name].shape == want.shape and OURS_UNROLLED[name].dtype == want.dtype
    np.testing.assert_allclose(OURS_UNROLLED[name], want, rtol=1e-5,
                               atol=1e-6 * np.abs(want).max())


def test_dynamic_unroll_is_the_cells_own_unroll_with_valid_length():
    cell = gluon.rnn.LSTMCell(4, input_size=2)
    cell.initialize(mx.init.Uniform(0.5))
    x = nd.random.normal(shape=(3, 5, 2))                    # NTC
    begin = [nd.random.normal(shape=(3, 4)) for _ in range(2)]
    lengths = nd.array([5, 2, 1])
    got, got_states = rnn.rnn_cell.dynamic_unroll(cell, x, begin, layout="NTC",
                                                  valid_length=lengths)
    want, want_states = cell.unroll(5, x, begin, layout="NTC", merge_outputs=True,
                                    valid_length=lengths)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6, atol=1e-7)
    for g, w in zip(got_states, want_states):
        np.testing.assert_allclose(g.asnumpy(), w.asnumpy(), rtol=1e-6, atol=1e-7)
    # a sequence of length 0 keeps its begin states and outputs zeros
    outputs, states = rnn.rnn_cell.dynamic_unroll(cell, x, begin, layout="NTC",
                                                  valid_length=nd.array([5, 0, 1]))
    for state, start in zip(states, begin):
        np.testing.assert_array_equal(state.asnumpy()[1], start.asnumpy()[1])
    assert not outputs.asnumpy()[1].any() and outputs.asnumpy()[0].all()
    with pytest.raises(TypeError, match="one NDArray of inputs"):
        rnn.rnn_cell.dynamic_unroll(cell, [x[:, 0], x[:, 1]], begin)
