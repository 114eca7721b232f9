"""``nd``: MXNet's imperative array API over NumPy and CuPy."""
from .ndarray import NDArray
from .ops import *  # noqa: F401,F403
from .ops import __all__ as _ops_all
from .creation import *  # noqa: F401,F403
from .creation import __all__ as _creation_all
from .nn import *  # noqa: F401,F403
from .nn import __all__ as _nn_all
from . import random
from . import sparse
from . import ops as _ops

# MXNet's older spellings of the same functions.
elemwise_add = broadcast_add = _ops.add
elemwise_sub = broadcast_sub = _ops.subtract
elemwise_mul = broadcast_mul = _ops.multiply
elemwise_div = broadcast_div = _ops.divide
broadcast_maximum = _ops.maximum
broadcast_minimum = _ops.minimum
broadcast_power = _ops.power
random_uniform = random.uniform
random_normal = random.normal
# ``slice`` cannot live in ops.py, whose code uses the builtin of that name.
slice = crop = _ops._slice_op  # noqa: A001

# MXNet operators beside the convolution kernels (nn.py): their own modules.
from .deconvolution import Deconvolution  # noqa: E402
from .normalization import GroupNorm, InstanceNorm  # noqa: E402
from .padding import Pad, pad  # noqa: E402

__all__ = ["NDArray", "random", "sparse", "slice", "crop", "Deconvolution", "GroupNorm", "InstanceNorm",
           "Pad", "pad"] + list(_ops_all) + list(_creation_all) + list(_nn_all)
