"""FTML (``ftml``, Zheng & Kwok 2017): Follow the Moving Leader."""
from __future__ import annotations

from ..context import array_module_of
from .optimizer import Optimizer, param_type, register, scaled_grad, zeros_like

__all__ = ["FTML", "ftml_rule"]


def ftml_rule(w, g, d, v, z, *, lr, wd, beta1, beta2, epsilon, t, rescale, clip):
    """MXNet's ftml_update (``t`` = this parameter's update count), with ``G = clip(rescale*g + wd*w)``
    (the decay is clipped too): ``v = b2*v + (1-b2)*G^2``;
    ``d_t = (1-b1^t)/lr * (sqrt(v/(1-b2^t)) + eps)``; ``z = b1*z + (1-b1)*G - (d_t - b1*d)*w``;
    ``d = d_t``; ``w = -z/d_t``."""
    xp = array_module_of(w)
    ty = param_type(w.dtype)
    lr, beta1, beta2, t = ty(lr), ty(beta1), ty(beta2), ty(t)
    one = ty(1)
    G = scaled_grad(g, rescale, clip, w, wd, params=ty)
    tmp = xp.square(G)
    tmp *= one - beta2
    v *= beta2
    v += tmp
    d_t = v / (one - beta2 ** t)
    xp.sqrt(d_t, out=d_t)
    d_t += w.dtype.type(epsilon)     # a double parameter in MXNet, the others float
    d_t *= (one - beta1 ** t) / lr
    z *= beta1
    G *= one - beta1
    z += G
    xp.multiply(d, beta1, out=tmp)
    xp.subtract(d_t, tmp, out=tmp)
    tmp *= w
    z -= tmp
    d[...] = d_t
    xp.divide(z, d_t, out=w)
    xp.negative(w, out=w)


@register
class FTML(Optimizer):
    """FTML. State: ``(d, v, z)``."""

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (zeros_like(weight), zeros_like(weight), zeros_like(weight))   # d, v, z

    def _step(self, index, w, g, state, lr, wd):
        d, v, z = state
        ftml_rule(w, g, d, v, z, lr=lr, wd=wd, beta1=self.beta1, beta2=self.beta2,
                  epsilon=self.epsilon, t=self._index_update_count[index],
                  rescale=self.rescale_grad, clip=self._clip)
