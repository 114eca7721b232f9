"""``nd``: MXNet's imperative array API over NumPy and CuPy."""
import warnings as _warnings

from .. import _malloc
from .ndarray import NDArray
from .ops import *  # noqa: F401,F403
from .ops import __all__ as _ops_all
from .creation import *  # noqa: F401,F403
from .creation import __all__ as _creation_all
from .nn import *  # noqa: F401,F403
from .nn import __all__ as _nn_all
from .ctc import CTCLoss, ctc_loss
from .spatial import BilinearSampler, GridGenerator, SpatialTransformer
from .more_ops import *  # noqa: F401,F403
from .more_ops import __all__ as _more_all
from . import random
from . import sparse
from . import contrib
from . import image
from . import linalg
from .sparse import cast_storage
from . import ops as _ops
from . import sampling as _sampling
from .sampling import (sample_uniform, sample_normal, sample_exponential, sample_gamma,  # noqa: F401
                       sample_poisson, sample_negative_binomial,
                       sample_generalized_negative_binomial, sample_multinomial)
from . import storage as _storage

# MXNet's operators give inf and NaN (log(0), 0/0, sqrt(-1)) silently. NumPy would warn, once,
# pointing at a line of this package that means nothing to the program that made the value.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"trainer_cli\.ndarray\.")

# MXNet's older spellings of the same functions.
elemwise_add = broadcast_add = _ops.add
elemwise_sub = broadcast_sub = _ops.subtract
elemwise_mul = broadcast_mul = _ops.multiply
elemwise_div = broadcast_div = _ops.divide
broadcast_maximum = _ops.maximum
broadcast_minimum = _ops.minimum
broadcast_power = _ops.power
# MXNet's top-level random names (``nd.uniform`` is ``nd.random.uniform``, ...).
uniform = random_uniform = random.uniform
normal = random_normal = random.normal
random_exponential = random.exponential
random_gamma = random.gamma
random_poisson = random.poisson
random_randint = random.randint
random_negative_binomial = random.negative_binomial
random_generalized_negative_binomial = random.generalized_negative_binomial
shuffle = random.shuffle
# ``slice`` cannot live in ops.py, whose code uses the builtin of that name.
slice = crop = _ops._slice_op  # noqa: A001

_RANDOM_NAMES = ["uniform", "normal", "random_uniform", "random_normal", "random_exponential",
                 "random_gamma", "random_poisson", "random_randint", "random_negative_binomial",
                 "random_generalized_negative_binomial", "shuffle"] + [
                     n for n in _sampling.__all__ if n.startswith("sample_")]
# MXNet operators beside the convolution kernels (nn.py): their own modules.
from .deconvolution import Deconvolution  # noqa: E402
from .normalization import LRN, GroupNorm, InstanceNorm  # noqa: E402
from .padding import Pad, pad  # noqa: E402
from .rnn import RNN  # noqa: E402
from .roi import ROIPooling  # noqa: E402
from .histogram import histogram, khatri_rao  # noqa: E402
from .im2col import col2im, im2col  # noqa: E402
# Python custom operators (mx.operator): their own out= and storage rules.
from .custom import Custom  # noqa: E402

_OP_NAMES = (["slice", "crop", "CTCLoss", "ctc_loss", "cast_storage", "BilinearSampler", "GridGenerator", "SpatialTransformer", "Deconvolution", "GroupNorm", "InstanceNorm", "LRN", "histogram", "khatri_rao", "im2col", "col2im",
              "Pad", "pad", "RNN", "ROIPooling"] + list(_ops_all) + list(_nn_all)
             + list(_more_all) + ["elemwise_add", "broadcast_add", "elemwise_sub", "broadcast_sub",
                                  "elemwise_mul", "broadcast_mul", "elemwise_div", "broadcast_div",
                                  "broadcast_maximum", "broadcast_minimum", "broadcast_power"])

# Every exported operator passes the storage dispatch (row_sparse / csr inputs: a sparse kernel,
# f(0) = 0 on the stored values, or MXNet's dense fallback) and takes MXNet's ``out=``. The
# library's own code calls the modules directly and skips the wrapper.
_DISPATCHED = _OP_NAMES + ["array"]
for _name in _OP_NAMES:
    if _name in _ops.VIEW_OPS:
        globals()[_name] = _ops.owning(globals()[_name])
for _name in _DISPATCHED:
    globals()[_name] = _storage.exported(_name, globals()[_name])
del _name
_storage.install_hooks()
_storage.install_methods(_ops._METHODS)
# MXNet's NDArray methods of the operators outside ops.py (the sparse classes inherit them, on
# their dense form); they take out= as the nd functions do.
for _name in ("nansum", "nanprod", "shape_array", "size_array", "diag", "slice_like", "pad",
              "depth_to_space", "space_to_depth", "argmax_channel"):
    setattr(NDArray, _name, globals()[_name])
del _name
_storage.install_sparse_namespace(globals())
# nd.contrib's operators take out= and sparse inputs (densified) as the others do; its control
# flow calls the caller's functions, and getnnz reads a csr array's stored values.
for _name in contrib.__all__:
    if _name in ("CTCLoss", "ctc_loss", "SparseEmbedding"):
        continue
    if _name not in ("foreach", "while_loop", "cond", "getnnz"):
        setattr(contrib, _name, _storage.exported("_contrib_" + _name, getattr(contrib, _name),
                                                  record=False))
contrib.CTCLoss, contrib.ctc_loss = globals()["CTCLoss"], globals()["ctc_loss"]
for _name in image.__all__:
    setattr(image, _name, _storage.exported("_image_" + _name, getattr(image, _name),
                                            record=False))
for _name in linalg.__all__:
    setattr(linalg, _name, _storage.exported("_linalg_" + _name, getattr(linalg, _name),
                                             record=False))
# Gluon code written from MXNet's own cells calls the element-wise arithmetic by MXNet's
# internal names (nd._internal._plus, _mul, ...): the same exported operators.
from . import _internal  # noqa: E402
for _alias, _name in _internal.ALIASES.items():
    setattr(_internal, _alias, globals()[_name])
del _alias
# MXNet's top-level spellings of nd.linalg's operators (linalg_gemm, ...; syevd has none).
_LINALG_NAMES = ["linalg_" + _name for _name in linalg.__all__ if _name != "syevd"]
for _name in _LINALG_NAMES:
    globals()[_name] = getattr(linalg, _name[len("linalg_"):])
del _name

__all__ = (["NDArray", "random", "sparse", "contrib", "image", "linalg"] + _OP_NAMES
           + list(_creation_all) + _RANDOM_NAMES + _LINALG_NAMES + ["Custom"])

# MXNet's mx.random holds nd.random's draws beside seed(): the generators' module, a layer below
# the arrays, takes them here.
from .. import random as _generators  # noqa: E402
for _name in random.__all__:
    setattr(_generators, _name, getattr(random, _name))
del _name

_malloc.tune()     # large freed arrays stay in the heap: no page faults in every step
