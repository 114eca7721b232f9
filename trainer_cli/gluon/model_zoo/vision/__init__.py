"""``gluon.model_zoo.vision``: every image-classification network of MXNet 1.9.1's model zoo,
with its parameter names, and ``get_model(name, **kwargs)``.

``pretrained=True`` loads MXNet's own model-zoo weights from the local model store
(``~/.mxnet/models`` or ``root=``); nothing is downloaded (see ``model_store``).
"""
from .alexnet import *  # noqa: F401,F403
from .densenet import *  # noqa: F401,F403
from .inception import *  # noqa: F401,F403
from .mobilenet import *  # noqa: F401,F403
from .resnet import *  # noqa: F401,F403
from .squeezenet import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403
import importlib as _importlib

# ``from .alexnet import *`` has rebound the package's ``alexnet`` to the function of that name.
_alexnet, _densenet, _inception, _mobilenet, _resnet, _squeezenet, _vgg = (
    _importlib.import_module(__name__ + "." + m)
    for m in ("alexnet", "densenet", "inception", "mobilenet", "resnet", "squeezenet", "vgg"))

_MODELS = {
    **{"resnet%d_v%d" % (n, v): getattr(_resnet, "resnet%d_v%d" % (n, v))
       for v in (1, 2) for n in (18, 34, 50, 101, 152)},
    **{"vgg%d%s" % (n, bn): getattr(_vgg, "vgg%d%s" % (n, bn))
       for n in (11, 13, 16, 19) for bn in ("", "_bn")},
    "alexnet": _alexnet.alexnet,
    **{"densenet%d" % n: getattr(_densenet, "densenet%d" % n) for n in (121, 161, 169, 201)},
    "squeezenet1.0": _squeezenet.squeezenet1_0,
    "squeezenet1.1": _squeezenet.squeezenet1_1,
    "inceptionv3": _inception.inception_v3,
    "mobilenet1.0": _mobilenet.mobilenet1_0,
    "mobilenet0.75": _mobilenet.mobilenet0_75,
    "mobilenet0.5": _mobilenet.mobilenet0_5,
    "mobilenet0.25": _mobilenet.mobilenet0_25,
    "mobilenetv2_1.0": _mobilenet.mobilenet_v2_1_0,
    "mobilenetv2_0.75": _mobilenet.mobilenet_v2_0_75,
    "mobilenetv2_0.5": _mobilenet.mobilenet_v2_0_5,
    "mobilenetv2_0.25": _mobilenet.mobilenet_v2_0_25,
}


def model_names() -> list[str]:
    """The names ``get_model`` takes."""
    return sorted(_MODELS)


def get_model(name, **kwargs):
    """The network called ``name`` (``resnet18_v1``, ``vgg16_bn``, ``mobilenetv2_0.25``, ...);
    ``classes``, ``pretrained``, ``ctx`` and ``root`` as MXNet's."""
    key = name.lower()
    if key not in _MODELS:
        raise ValueError("Model %s is not supported. Available options are\n\t%s"
                         % (name, "\n\t".join(model_names())))
    return _MODELS[key](**kwargs)
