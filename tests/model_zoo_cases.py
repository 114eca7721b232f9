"""What the model-zoo golden data holds, shared by its generator (run with real MXNet 1.9.1)
and the tests: the architectures, the inputs and the weights a forward is compared on."""
import zlib

import numpy as np

# Every name of MXNet 1.9.1's gluon.model_zoo.vision.get_model.
ALL_MODELS = (["resnet%d_v%d" % (n, v) for v in (1, 2) for n in (18, 34, 50, 101, 152)]
              + ["vgg%d%s" % (n, bn) for n in (11, 13, 16, 19) for bn in ("", "_bn")]
              + ["alexnet", "densenet121", "densenet161", "densenet169", "densenet201",
                 "squeezenet1.0", "squeezenet1.1", "inceptionv3",
                 "mobilenet1.0", "mobilenet0.75", "mobilenet0.5", "mobilenet0.25",
                 "mobilenetv2_1.0", "mobilenetv2_0.75", "mobilenetv2_0.5", "mobilenetv2_0.25"])

CLASSES = 10


def canonical_size(name: str) -> int:
    """The input size the architecture is built for (its parameter shapes depend on it)."""
    return 299 if name == "inceptionv3" else 224


def input_size(name: str) -> int:
    """The input size the tests run the architecture at: the smallest that every layer of it
    takes (its pooling windows fix the size for DenseNet, SqueezeNet and Inception)."""
    if name.startswith(("densenet", "squeezenet")):
        return 224
    if name == "inceptionv3":
        return 299
    return 64 if name == "alexnet" else 32


# Architectures also compared forward, on the same weights, at their test size.
FORWARD = ("resnet18_v1", "resnet50_v1", "resnet18_v2", "resnet50_v2", "vgg11_bn", "alexnet",
           "densenet121", "squeezenet1.0", "squeezenet1.1", "inceptionv3", "mobilenet0.25",
           "mobilenetv2_0.25")


def weight(name: str, shape) -> np.ndarray:
    """A parameter's test value from its structural name: small, seeded by the name, with
    BatchNorm's variances and scales near 1 so that deep networks neither vanish nor explode."""
    rng = np.random.RandomState(zlib.crc32(name.encode()))
    if name.endswith(("running_var", "gamma")):
        return rng.uniform(0.8, 1.2, size=shape).astype(np.float32)
    if name.endswith(("running_mean", "beta", "bias")):
        return rng.uniform(-0.1, 0.1, size=shape).astype(np.float32)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    bound = np.sqrt(3.0 / max(fan_in, 1))
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def image(name: str, size: int) -> np.ndarray:
    rng = np.random.RandomState(zlib.crc32(("input:" + name).encode()))
    return rng.uniform(-1, 1, size=(1, 3, size, size)).astype(np.float32)
