"""``nd.im2col``/``nd.col2im`` beyond the op registry's 2-D cases (MXNet's bits there): 1-D and
3-D kernels (MXNet 1.9.1's fail on them) unfold and fold as adjoints, and the columns are a
convolution's (a GEMM of them is ``nd.Convolution``)."""
import numpy as np
import pytest

from trainer_cli import nd


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 9), dict(kernel=(3,), stride=(2,), pad=(1,))),
    ((1, 2, 5, 4, 6), dict(kernel=(2, 3, 2), stride=(1, 2, 2), dilate=(2, 1, 1), pad=(1, 0, 1))),
    ((2, 2, 6, 7), dict(kernel=(3, 2), stride=(2, 1), dilate=(1, 2), pad=(1, 1))),
])
def test_fold_is_the_adjoint_of_unfold(shape, kw):
    rng = np.random.RandomState(0)
    x = nd.array(rng.randn(*shape), dtype="float64")
    cols = nd.im2col(x, **kw)
    c = nd.array(rng.randn(*cols.shape), dtype="float64")
    folded = nd.col2im(c, output_size=shape[2:], **kw)
    np.testing.assert_allclose((cols * c).sum().asscalar(), (x * folded).sum().asscalar(),
                               rtol=1e-12)


def test_a_gemm_of_the_columns_is_a_convolution():
    rng = np.random.RandomState(1)
    x, w = nd.array(rng.randn(2, 3, 6, 5)), nd.array(rng.randn(4, 3, 3, 2))
    cols = nd.im2col(x, kernel=(3, 2), stride=(1, 1), pad=(1, 0))
    got = nd.dot(w.reshape((4, -1)), cols.transpose((1, 0, 2)).reshape((18, -1)))
    want = nd.Convolution(x, w, kernel=(3, 2), pad=(1, 0), num_filter=4, no_bias=True)
    np.testing.assert_allclose(got.reshape((4, 2, -1)).transpose((1, 0, 2)).asnumpy(),
                               want.reshape((2, 4, -1)).asnumpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="col2im: data must be"):
        nd.col2im(cols[:, :5], output_size=(6, 5), kernel=(3, 2), pad=(1, 0))
