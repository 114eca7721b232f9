"""Optimizers of MXNet 1.9 (``optimizer.create(name, **params)``), the ``Updater`` and state files.

One module per optimizer; each holds its hyper-parameters (the constructor) and one update rule
written once over NumPy/CuPy arrays. ``Optimizer.opt_registry`` maps the lower-cased class names
to the classes.
"""
import warnings as _warnings

from .optimizer import Optimizer, register, create
from .sgd import SGD, ccSGD
from .nag import NAG
from .signum import Signum
from .sgld import SGLD
from .dcasgd import DCASGD
from .lars import LARS
from .lbsgd import LBSGD
from .adam import Adam, AdamW
from .adagrad import AdaGrad, GroupAdaGrad
from .rmsprop import RMSProp
from .adadelta import AdaDelta
from .ftrl import Ftrl
from .adamax import Adamax
from .nadam import Nadam
from .ftml import FTML
from .lamb import LAMB
from .testing import Test
from .updater import Updater, get_updater
from . import contrib
from .state_file import StateFileError


def names() -> list:
    """The registered optimizer names, sorted (``create`` takes any of them)."""
    return sorted(Optimizer.opt_registry)


def lookup(name):
    """The optimizer class registered under ``name`` (any case), or None."""
    return Optimizer.opt_registry.get(str(name).lower())

__all__ = ["Optimizer", "register", "create", "names", "lookup", "Updater", "get_updater", "StateFileError",
           "SGD", "ccSGD", "NAG", "Signum", "SGLD", "DCASGD", "LARS", "LBSGD", "Adam", "AdamW",
           "AdaGrad", "GroupAdaGrad", "RMSProp", "AdaDelta", "Ftrl", "Adamax", "Nadam", "FTML",
           "LAMB", "Test", "contrib"]

# MXNet's update operators (sgd_update, adam_update, ...) turn an overflowing gradient into inf
# and NaN weights silently; NumPy would warn from these modules' lines, as from the operators'
# (ndarray's own filter).
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"trainer_cli\.optimizer\.")
