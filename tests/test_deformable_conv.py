"""``nd.contrib.DeformableConvolution`` / ``ModulatedDeformableConvolution`` and
``gluon.contrib.cnn``'s blocks against MXNet 1.9.1 (tests/data/mxnet_deformable/deformable.npz,
recorded from the real MXNet by the same ``deformable_cases``), plus checks that need no MXNet:
finite-difference gradients in float64 (MXNet's CPU build has no modulated backward), v2 with a
unit mask equal to v1 away from the borders, float16, batch pieces, errors, save/load.

The deformable im2col is MXNet's bit for bit (the ``cols_*`` cases: a one-hot weight makes the
output the column buffer itself); everything after a GEMM or a channel sum is compared to
float32 rounding (rtol 1e-5; float64 1e-12), as BLAS's summation order is not MXNet's."""
import os

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.ndarray import deformable as _deformable

RECORDED, deformable_cases = replay.recording("mxnet_deformable", "deformable.npz",
                                              "deformable_cases")
OURS = deformable_cases.record(mx)
OURS.update(deformable_cases.record_blocks(mx))


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(k for k in RECORDED if k != "load/out")


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if k != "load/out"))
def test_each_case_is_mxnets(name):
    want = RECORDED[name]
    got = replay.same_layout(OURS[name], want)
    if name.startswith("cols_") or want.dtype.kind in "US":
        np.testing.assert_array_equal(got, want)
        return
    tight = want.dtype == np.float64
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=1e-12 if tight else 1e-5,
                               atol=(1e-13 if tight else 1e-6) * scale)


# ----------------------------------------------------------------------- independent checks

def _inside_offsets(rng, n, dg, kernel, out_hw, h, w, margin=0.05):
    """Offsets putting every place strictly inside (margin, size - 1 - margin)."""
    kh, kw = kernel
    ho, wo = out_hw
    base_y = np.arange(kh).reshape(kh, 1, 1, 1) - 1 + np.arange(ho).reshape(1, 1, ho, 1)
    base_x = np.arange(kw).reshape(1, kw, 1, 1) - 1 + np.arange(wo).reshape(1, 1, 1, wo)
    shape = (n, dg, kh, kw, ho, wo)
    y = rng.uniform(margin, h - 1 - margin, shape) - base_y
    x = rng.uniform(margin, w - 1 - margin, shape) - base_x
    return np.stack([y, x], axis=4).reshape(n, -1, ho, wo)


def _call(op, arrays, kwargs, head):
    args = [nd.array(a, dtype=a.dtype) for a in arrays]
    for a in args:
        a.attach_grad()
    with autograd.record():
        y = getattr(nd.contrib, op)(*args, **kwargs)
    y.backward(nd.array(head, dtype=head.dtype))
    return y.asnumpy(), [a.grad.asnumpy() for a in args]


def _setup(modulated, seed=3, dtype=np.float64):
    rng = np.random.RandomState(seed)
    n, c, h, w, f, dg = 2, 4, 5, 4, 4, 2
    kwargs = dict(kernel=(3, 2), pad=(1, 1), stride=(1, 2), dilate=(2, 1), num_filter=f,
                  num_group=1, num_deformable_group=dg)
    ho, wo = (h + 2 - 5) // 1 + 1, (w + 2 - 2) // 2 + 1
    arrays = [rng.randn(n, c, h, w), (rng.randn(n, dg * 12, ho, wo) * 1.3)]
    if modulated:
        arrays.append(rng.uniform(0, 2, (n, dg * 6, ho, wo)))
    arrays += [rng.randn(f, c, 3, 2), rng.randn(f)]
    head = rng.randn(n, f, ho, wo)
    return [a.astype(dtype) for a in arrays], kwargs, head.astype(dtype)


@pytest.mark.parametrize("op", ["DeformableConvolution", "ModulatedDeformableConvolution"])
def test_gradients_match_finite_differences_in_float64(op):
    arrays, kwargs, head = _setup(op.startswith("Modulated"))
    _, grads = _call(op, arrays, kwargs, head)
    fn = getattr(nd.contrib, op)

    def loss(values):
        return float((fn(*[nd.array(v, dtype=v.dtype) for v in values], **kwargs).asnumpy()
                      * head).sum())
    rng = np.random.RandomState(0)
    eps = 1e-6
    for k, (a, g) in enumerate(zip(arrays, grads)):
        for flat in rng.choice(a.size, min(a.size, 12), replace=False):
            idx = np.unravel_index(flat, a.shape)
            plus = [v.copy() for v in arrays]
            minus = [v.copy() for v in arrays]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            numeric = (loss(plus) - loss(minus)) / (2 * eps)
            assert abs(numeric - g[idx]) <= 1e-6 * (1 + abs(numeric)), (op, k, idx)


def test_modulated_with_a_unit_mask_is_v1_away_from_the_borders():
    rng = np.random.RandomState(5)
    n, c, h, w, f, dg = 2, 4, 5, 6, 4, 2
    kwargs = dict(kernel=(3, 3), pad=(1, 1), num_filter=f, num_group=2, num_deformable_group=dg)
    x = rng.randn(n, c, h, w).astype(np.float32)
    off = _inside_offsets(rng, n, dg, (3, 3), (h, w), h, w).astype(np.float32)
    mask = np.ones((n, dg * 9, h, w), np.float32)
    weight = rng.randn(f, c // 2, 3, 3).astype(np.float32)
    bias = rng.randn(f).astype(np.float32)
    head = rng.randn(n, f, h, w).astype(np.float32)
    y1, (gx1, goff1, gw1, gb1) = _call("DeformableConvolution", [x, off, weight, bias], kwargs,
                                       head)
    y2, (gx2, goff2, _, gw2, gb2) = _call("ModulatedDeformableConvolution",
                                          [x, off, mask, weight, bias], kwargs, head)
    for a, b in ((y1, y2), (gx1, gx2), (goff1, goff2), (gw1, gw2), (gb1, gb2)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * np.abs(a).max())


def test_boundary_rules_differ_as_mxnets_do():
    # One pixel image row [1, 2, 3]; places between the last pixel and the edge: v1 repeats
    # the last pixel, v2 blends it with zero; places in (-1, 0): v1 reads 0, v2 blends.
    data = nd.array(np.array([[[[1.0, 2.0, 3.0]]]], np.float32))
    weight = nd.ones((1, 1, 1, 1))
    for x_place, v1, v2 in ((2.5, 3.0, 1.5), (-0.5, 0.0, 0.5), (3.0, 0.0, 0.0), (0.25, 1.25, 1.25)):
        off = nd.array(np.array([0.0, x_place], np.float32).reshape(1, 2, 1, 1))
        # The offset map is (1, 2, 1, 3): move only the first output position.
        offset = nd.concat(off, nd.zeros((1, 2, 1, 2)), dim=3)
        out1 = nd.contrib.DeformableConvolution(data, offset, weight, kernel=(1, 1),
                                                num_filter=1, no_bias=True)
        out2 = nd.contrib.ModulatedDeformableConvolution(data, offset, nd.ones((1, 1, 1, 3)),
                                                         weight, kernel=(1, 1), num_filter=1,
                                                         no_bias=True)
        assert out1.asnumpy()[0, 0, 0, 0] == v1 and out2.asnumpy()[0, 0, 0, 0] == v2
        assert out1.asnumpy()[0, 0, 0, 1:].tolist() == [2.0, 3.0]


@pytest.mark.parametrize("op", ["DeformableConvolution", "ModulatedDeformableConvolution"])
def test_float16_runs_in_float32_and_rounds_once(op):
    arrays, kwargs, head = _setup(op.startswith("Modulated"), dtype=np.float16)
    y16, g16 = _call(op, arrays, kwargs, head)
    y32, g32 = _call(op, [a.astype(np.float32) for a in arrays], kwargs,
                     head.astype(np.float32))
    assert y16.dtype == np.float16 and all(g.dtype == np.float16 for g in g16)
    np.testing.assert_array_equal(y16, y32.astype(np.float16))
    for a, b in zip(g16, g32):
        np.testing.assert_array_equal(a, b.astype(np.float16))


@pytest.mark.parametrize("op", ["DeformableConvolution", "ModulatedDeformableConvolution"])
def test_the_batch_in_pieces_gives_the_same_numbers(op, monkeypatch):
    arrays, kwargs, head = _setup(op.startswith("Modulated"), dtype=np.float32)
    arrays = [np.concatenate([a, a * 0.5, -a]) if k < 2 + op.startswith("Modulated") else a
              for k, a in enumerate(arrays)]
    head = np.concatenate([head, head, head])
    y, grads = _call(op, arrays, kwargs, head)
    monkeypatch.setattr(_deformable, "_PIECE_ELEMENTS", 1)     # one image a piece
    y1, grads1 = _call(op, arrays, kwargs, head)
    np.testing.assert_array_equal(y, y1)
    for k, (a, b) in enumerate(zip(grads, grads1)):
        if a.shape == arrays[-2].shape:                          # the weight: summed over pieces
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(a).max())
        else:
            np.testing.assert_array_equal(a, b)


def test_only_the_requested_gradients_are_computed():
    arrays, kwargs, head = _setup(False, dtype=np.float32)
    args = [nd.array(a) for a in arrays]
    args[2].attach_grad()
    with autograd.record():
        y = nd.contrib.DeformableConvolution(*args, **kwargs)
    y.backward(nd.array(head))
    _, grads = _call("DeformableConvolution", arrays, kwargs, head)
    np.testing.assert_array_equal(args[2].grad.asnumpy(), grads[2])


def _args(n=1, c=4, h=5, w=5, f=2, taps=9, dg=1):
    return dict(data=nd.ones((n, c, h, w)), offset=nd.zeros((n, dg * 2 * taps, h, w)),
                weight=nd.ones((f, c, 3, 3)), bias=nd.zeros((f,)))


@pytest.mark.parametrize("change, kwargs, error, match", [
    ({"offset": nd.zeros((1, 9, 5, 5))}, {}, ValueError, "DeformableConvolution: offset must be"),
    ({"weight": nd.ones((2, 3, 3, 3))}, {}, ValueError, "DeformableConvolution: weight must be"),
    ({"bias": nd.zeros((3,))}, {}, ValueError, "DeformableConvolution: bias must be"),
    ({}, {"num_group": 3}, ValueError, "channels must divide into num_group=3"),
    ({}, {"num_deformable_group": 3}, ValueError, "divide into num_deformable_group=3"),
    ({}, {"layout": "NHWC"}, ValueError, "only the NCHW layout"),
    ({}, {"kernel": (3, 3, 3)}, ValueError, "only 2-D deformable convolution"),
    ({}, {"stride": 0}, ValueError, "stride must be >= 1"),
    ({"bias": None}, {}, TypeError, "bias is required unless no_bias=True"),
    ({"offset": nd.zeros((1, 18, 5, 5), dtype="float64")}, {}, TypeError,
     "offset must have data's dtype"),
    ({"data": nd.ones((1, 4, 5))}, {}, ValueError, "data must be 4-D"),
    ({"data": nd.ones((1, 4, 2, 2))}, {"kernel": (5, 5)}, ValueError,
     "kernel \\(5, 5\\) exceeds the padded input \\(4, 4\\)"),
])
def test_bad_arguments_say_which(change, kwargs, error, match):
    args = dict(_args(), **change)
    with pytest.raises(error, match=match):
        nd.contrib.DeformableConvolution(kernel=kwargs.pop("kernel", (3, 3)), pad=(1, 1),
                                         num_filter=2, **args, **kwargs)


def test_bad_modulated_arguments_say_which():
    args = _args(n=3)
    mask = nd.ones((3, 9, 5, 5))
    kw = dict(kernel=(3, 3), pad=(1, 1), num_filter=2)
    with pytest.raises(ValueError, match="ModulatedDeformableConvolution: mask must be"):
        nd.contrib.ModulatedDeformableConvolution(mask=nd.ones((3, 18, 5, 5)), **args, **kw)
    with pytest.raises(ValueError, match="batch size 3 must be at most im2col_step=2"):
        nd.contrib.ModulatedDeformableConvolution(mask=mask, im2col_step=2, **args, **kw)
    out = nd.contrib.ModulatedDeformableConvolution(mask=mask, im2col_step=3, **args, **kw)
    assert out.shape == (3, 2, 5, 5)


# ----------------------------------------------------------------------------- Gluon blocks

def test_cnn_is_a_module_with_the_two_blocks():
    from trainer_cli.gluon.contrib import cnn
    assert mx.gluon.contrib.cnn is cnn
    assert sorted(cnn.__all__) == ["DeformableConvolution", "ModulatedDeformableConvolution"]


def test_parameters_mxnet_wrote_load_and_give_its_output(tmp_path):
    net = mx.gluon.contrib.cnn.DeformableConvolution(4, kernel_size=3, padding=1, in_channels=3)
    net.load_parameters(os.path.join(replay.DATA, "mxnet_deformable", "deformable_block.params"))
    x = nd.array(deformable_cases.block_input("v1"))
    want = RECORDED["load/out"]
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5,
                               atol=1e-6 * np.abs(want).max())
    # Saved here and loaded into a fresh block: the same numbers.
    net.save_parameters(str(tmp_path / "d.params"))
    again = mx.gluon.contrib.cnn.DeformableConvolution(4, kernel_size=3, padding=1)
    again.load_parameters(str(tmp_path / "d.params"))
    np.testing.assert_array_equal(again(x).asnumpy(), net(x).asnumpy())


def test_modulated_block_trains_and_its_gradients_match_finite_differences():
    net = mx.gluon.contrib.cnn.ModulatedDeformableConvolution(4, kernel_size=3, padding=1,
                                                              num_deformable_group=2)
    x = nd.array(np.random.RandomState(1).randn(2, 4, 5, 5))
    net.initialize()
    net(x)
    rng = np.random.RandomState(2)
    for p in net.collect_params().values():
        p.set_data(nd.array(rng.randn(*p.shape) * 0.3))
    net.cast("float64")
    x = x.astype("float64")
    with autograd.record():
        loss = (net(x) ** 2).sum()
    loss.backward()
    param = net.offset_weight
    grad = param.grad().asnumpy()
    value = param.data().asnumpy()
    eps = 1e-6
    for flat in rng.choice(value.size, 8, replace=False):
        idx = np.unravel_index(flat, value.shape)
        results = []
        for sign in (1, -1):
            moved = value.copy()
            moved[idx] += sign * eps
            param.set_data(nd.array(moved, dtype="float64"))
            results.append(float((net(x) ** 2).sum().asscalar()))
        param.set_data(nd.array(value, dtype="float64"))
        numeric = (results[0] - results[1]) / (2 * eps)
        assert abs(numeric - grad[idx]) <= 1e-5 * (1 + abs(numeric))


def test_hybridized_blocks_in_a_network_run_and_export(tmp_path):
    net = mx.gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(mx.gluon.contrib.cnn.DeformableConvolution(4, kernel_size=3, padding=1))
        net.add(mx.gluon.nn.Activation("relu"))
    net.initialize()
    x = nd.array(np.random.RandomState(3).randn(1, 2, 5, 5))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_array_equal(net(x).asnumpy(), want)
    np.testing.assert_array_equal(net(x).asnumpy(), want)         # from the cached plan
    net.export(str(tmp_path / "net"))
    block = mx.gluon.SymbolBlock.imports(str(tmp_path / "net-symbol.json"), "data",
                                         str(tmp_path / "net-0000.params"))
    np.testing.assert_array_equal(block(x).asnumpy(), want)
