"""The operators written for the CPU and CuPy alike whose CuPy paths only a lent device runs:
nd.contrib's detection, ROI, resizing and deformable operators, nd.linalg, nd.image, the special
functions, Python custom operators and BatchNorm's moving statistics. Each case runs on cpu(0)
and gpu(0) from the same inputs; values and gradients must agree to float32 rounding (the
GPU's sums and its maths library round otherwise)."""
from __future__ import annotations

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import autograd, cpu, gpu, nd

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(mx.num_gpus() == 0, reason="no GPU visible to CuPy")]

RNG = numpy.random.RandomState(0)
DATA = RNG.rand(2, 3, 8, 8).astype(numpy.float32)
ROIS = numpy.array([[0, 0.5, 0.5, 6.2, 5.1], [1, 2.0, 1.0, 7.5, 7.9], [0, 3.0, 3.0, 3.0, 3.0]],
                   numpy.float32)
_XS, _YS = numpy.sort(RNG.rand(2, 12, 2), axis=-1), numpy.sort(RNG.rand(2, 12, 2), axis=-1)
# [class id, score, xmin, ymin, xmax, ymax] rows
BOXES = numpy.concatenate([RNG.randint(0, 3, (2, 12, 1)), RNG.rand(2, 12, 1), _XS[..., :1],
                           _YS[..., :1], _XS[..., 1:], _YS[..., 1:]], axis=-1).astype(
                               numpy.float32)
SPD = (lambda a: a @ a.T + 3 * numpy.eye(4))(RNG.rand(4, 4)).astype(numpy.float32)


def _grads(fn, arrays, ctx):
    """``fn``'s outputs and the gradients of a fixed weighted sum of them, on ``ctx``."""
    inputs = [nd.array(a, ctx=ctx, dtype=a.dtype) for a in arrays]
    for x in inputs:
        if x.dtype == numpy.float32:
            x.attach_grad()
    with autograd.record():
        outs = fn(*inputs)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        total = None
        for k, out in enumerate(outs):
            if out.dtype != numpy.float32:
                continue
            weights = nd.array(numpy.random.RandomState(k).rand(*out.shape), ctx=ctx)
            term = (out * weights).sum()
            total = term if total is None else total + term
    if total is not None and total._node is not None:
        total.backward()
    return [o.asnumpy() for o in outs] + [x.grad.asnumpy() for x in inputs
                                            if x.grad is not None]


C = nd.contrib
CASES = {
    "box_nms": (lambda b: C.box_nms(b, overlap_thresh=0.4, topk=6, coord_start=2,
                                    score_index=1, id_index=0), [BOXES]),
    "box_iou": (lambda a, b: C.box_iou(a, b), [BOXES[0, :, 2:], BOXES[1, :, 2:]]),
    "bipartite_matching": (lambda s: C.bipartite_matching(s, threshold=0.2),
                           [RNG.rand(2, 5, 4).astype(numpy.float32)]),
    "box_decode": (lambda d, a: C.box_decode(d, a, clip=2.0),
                   [RNG.randn(2, 12, 4).astype(numpy.float32) * 0.2, BOXES[:1, :, 2:]]),
    "multibox_prior": (lambda d: C.MultiBoxPrior(d, sizes=[0.3, 0.6], ratios=[1, 2, 0.5],
                                                 clip=True), [DATA]),
    "multibox_target_detection": (
        lambda d, cls: C.MultiBoxTarget(C.MultiBoxPrior(d, sizes=[0.4]),
                                        nd.array([[[0, 0.1, 0.1, 0.5, 0.6], [-1] * 5]] * 2,
                                                 ctx=d.context), cls)
        + [C.MultiBoxDetection(nd.softmax(cls, axis=1), nd.zeros((2, 256), ctx=d.context),
                               C.MultiBoxPrior(d, sizes=[0.4]))],
        [DATA, RNG.rand(2, 2, 64).astype(numpy.float32)]),
    "roi_pooling": (lambda d, r: nd.ROIPooling(d, r, (2, 3), 0.9), [DATA, ROIS]),
    "roi_align": (lambda d, r: C.ROIAlign(d, r, (3, 2), 0.8, sample_ratio=2), [DATA, ROIS]),
    "roi_align_aligned": (lambda d, r: C.ROIAlign(d, r, (2, 2), 1.0, aligned=True),
                          [DATA, ROIS[:2]]),
    "psroi_pooling": (lambda d, r: C.PSROIPooling(d, r, 0.7, 1, 2),
                      [RNG.rand(2, 4, 6, 6).astype(numpy.float32), ROIS[:2]]),
    "bilinear_resize": (lambda d: C.BilinearResize2D(d, height=11, width=5), [DATA]),
    "bilinear_resize_corners": (lambda d: C.BilinearResize2D(d, scale_height=1.5,
                                                             scale_width=0.75,
                                                             align_corners=False), [DATA]),
    "deformable_conv": (lambda d, o, w, b: C.DeformableConvolution(
        d, o, w, b, kernel=(3, 3), pad=(1, 1), num_filter=4),
        [DATA, RNG.randn(2, 18, 8, 8).astype(numpy.float32),
         RNG.randn(4, 3, 3, 3).astype(numpy.float32) * 0.3, RNG.randn(4).astype(numpy.float32)]),
    "modulated_deformable_conv": (lambda d, o, m, w: C.ModulatedDeformableConvolution(
        d, o, m, w, kernel=(3, 3), pad=(1, 1), num_filter=2, no_bias=True),
        [DATA, RNG.randn(2, 18, 8, 8).astype(numpy.float32),
         RNG.rand(2, 9, 8, 8).astype(numpy.float32), RNG.randn(2, 3, 3, 3).astype(numpy.float32)]),
    "linalg": (lambda a, b: [nd.linalg.gemm2(a, b, transpose_b=True), nd.linalg.potrf(a),
                             nd.linalg.inverse(a), nd.linalg.det(a),
                             nd.linalg.syevd(a)[1], nd.linalg.sumlogdiag(nd.linalg.potrf(a))],
               [SPD, RNG.rand(3, 4).astype(numpy.float32)]),
    "image": (lambda u, f: [nd.image.to_tensor(u), nd.image.normalize(f, (0.5, 0.4, 0.3),
                                                                       (0.2, 0.3, 0.4)),
                            nd.image.resize(u, (5, 7)), nd.image.flip_left_right(f),
                            nd.image.crop(u, 1, 2, 4, 3)],
              [RNG.randint(0, 255, (6, 8, 3)).astype(numpy.uint8),
               RNG.rand(3, 6, 8).astype(numpy.float32)]),
    "special": (lambda x: [nd.gamma(x), nd.gammaln(x), nd.erfinv(x * 0.9)],
                [RNG.rand(50).astype(numpy.float32) * 0.98 + 0.01]),
    "batchnorm_moving": (lambda d, g, b: [nd.BatchNorm(d, g, b, MOVING[0], MOVING[1],
                                                       fix_gamma=False)],
                         [DATA, numpy.ones(3, numpy.float32), numpy.zeros(3, numpy.float32)]),
}
MOVING = []


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_gives_the_cpus_values_and_gradients(name):
    fn, arrays = CASES[name]
    results = []
    for ctx in (cpu(0), gpu(0)):
        MOVING[:] = [nd.zeros(3, ctx=ctx), nd.ones(3, ctx=ctx)]
        results.append(_grads(fn, arrays, ctx) + [m.asnumpy() for m in MOVING])
    assert len(results[0]) == len(results[1])
    for want, got in zip(*results):
        assert want.shape == got.shape and want.dtype == got.dtype
        numpy.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(
            1.0, float(numpy.nanmax(numpy.abs(want))) if want.size else 1.0))


def test_a_custom_operator_runs_on_the_gpu():
    @mx.operator.register("gpu_square")
    class SquareProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Square()

    class Square(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])

    x = nd.array([1.0, -2.0, 3.0], ctx=gpu(0))
    x.attach_grad()
    with autograd.record():
        y = nd.Custom(x, op_type="gpu_square")
    y.backward()
    assert y.context == gpu(0)
    numpy.testing.assert_array_equal(y.asnumpy(), [1.0, 4.0, 9.0])
    numpy.testing.assert_array_equal(x.grad.asnumpy(), [2.0, -4.0, 6.0])
