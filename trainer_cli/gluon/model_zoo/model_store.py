"""Pretrained weights from the local model store, where MXNet keeps its model-zoo files.

MXNet 1.9.1 names each file ``<model>-<first 8 hex digits of its SHA-1>.params`` under
``$MXNET_HOME/models`` (default ``~/.mxnet/models``) and downloads it when absent. Nothing is
downloaded here: a file MXNet (or you) put there is checked against MXNet's published SHA-1 and
loaded; a missing or different file is an error that names the file expected and where MXNet
publishes it.
"""
from __future__ import annotations

import hashlib
import os

from ..._bounded import open_regular
from ...base import data_dir

__all__ = ["ModelStoreError", "data_dir", "get_model_file", "short_hash", "load_pretrained"]

# The SHA-1 of each model-zoo file MXNet 1.9.1 publishes (mxnet/gluon/model_zoo/model_store.py).
_SHA1 = {
    "alexnet": "44335d1f0046b328243b32a26a4fbd62d9057b45",
    "densenet121": "f27dbf2dbd5ce9a80b102d89c7483342cd33cb31",
    "densenet161": "b6c8a95717e3e761bd88d145f4d0a214aaa515dc",
    "densenet169": "2603f878403c6aa5a71a124c4a3307143d6820e9",
    "densenet201": "1cdbc116bc3a1b65832b18cf53e1cb8e7da017eb",
    "inceptionv3": "ed47ec45a937b656fcc94dabde85495bbef5ba1f",
    "mobilenet0.25": "9f83e440996887baf91a6aff1cccc1c903a64274",
    "mobilenet0.5": "8e9d539cc66aa5efa71c4b6af983b936ab8701c3",
    "mobilenet0.75": "529b2c7f4934e6cb851155b22c96c9ab0a7c4dc2",
    "mobilenet1.0": "6b8c5106c730e8750bcd82ceb75220a3351157cd",
    "mobilenetv2_1.0": "36da4ff1867abccd32b29592d79fc753bca5a215",
    "mobilenetv2_0.75": "e2be7b72a79fe4a750d1dd415afedf01c3ea818d",
    "mobilenetv2_0.5": "aabd26cd335379fcb72ae6c8fac45a70eab11785",
    "mobilenetv2_0.25": "ae8f9392789b04822cbb1d98c27283fc5f8aa0a7",
    "resnet18_v1": "a0666292f0a30ff61f857b0b66efc0228eb6a54b",
    "resnet34_v1": "48216ba99a8b1005d75c0f3a0c422301a0473233",
    "resnet50_v1": "0aee57f96768c0a2d5b23a6ec91eb08dfb0a45ce",
    "resnet101_v1": "d988c13d6159779e907140a638c56f229634cb02",
    "resnet152_v1": "671c637a14387ab9e2654eafd0d493d86b1c8579",
    "resnet18_v2": "a81db45fd7b7a2d12ab97cd88ef0a5ac48b8f657",
    "resnet34_v2": "9d6b80bbc35169de6b6edecffdd6047c56fdd322",
    "resnet50_v2": "ecdde35339c1aadbec4f547857078e734a76fb49",
    "resnet101_v2": "18e93e4f48947e002547f50eabbcc9c83e516aa6",
    "resnet152_v2": "f2695542de38cf7e71ed58f02893d82bb409415e",
    "squeezenet1.0": "264ba4970a0cc87a4f15c96e25246a1307caf523",
    "squeezenet1.1": "33ba0f93753c83d86e1eb397f38a667eaf2e9376",
    "vgg11": "dd221b160977f36a53f464cb54648d227c707a05",
    "vgg11_bn": "ee79a8098a91fbe05b7a973fed2017a6117723a8",
    "vgg13": "6bc5de58a05a5e2e7f493e2d75a580d83efde38c",
    "vgg13_bn": "7d97a06c3c7a1aecc88b6e7385c2b373a249e95e",
    "vgg16": "e660d4569ccb679ec68f1fd3cce07a387252a90a",
    "vgg16_bn": "7f01cf050d357127a73826045c245041b0df7363",
    "vgg19": "ad2f660d101905472b83590b59708b71ea22b2e5",
    "vgg19_bn": "f360b758e856f1074a85abd5fd873ed1d98297c3",
}
_URL = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/models/%s.zip"


class ModelStoreError(FileNotFoundError):
    """A pretrained model's file is missing from the local store or is not the published one."""


def short_hash(name: str) -> str:
    if name not in _SHA1:
        raise ValueError("Pretrained model for %s is not available." % name)
    return _SHA1[name][:8]


# More than any file MXNet publishes holds (vgg19_bn, the largest, about 550 MB): a larger file
# is not the published one, and is refused without being hashed.
MAX_MODEL_FILE_BYTES = 1 << 30


def _sha1(path: str) -> str:
    """The SHA-1 of the regular file ``path`` (a FIFO or a device in the store is refused, not
    read forever); None when it is larger than any published file."""
    digest = hashlib.sha1()
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size > MAX_MODEL_FILE_BYTES:
            return None
        left = MAX_MODEL_FILE_BYTES + 1
        for block in iter(lambda: f.read(min(1 << 20, left)), b""):
            digest.update(block)
            left -= len(block)
            if not left:
                return None
    return digest.hexdigest()


def get_model_file(name: str, root: str | None = None) -> str:
    """The path of model ``name``'s pretrained ``.params`` file in ``root`` (default
    ``$MXNET_HOME/models``), checked against MXNet's published SHA-1."""
    file_name = "%s-%s" % (name, short_hash(name))
    root = os.path.expanduser(root if root is not None else os.path.join(data_dir(), "models"))
    path = os.path.join(root, file_name + ".params")
    where = ("MXNet publishes it as %s (unzip it there), or run MXNet 1.9.1's "
             "gluon.model_zoo.vision.get_model(%r, pretrained=True) once, which stores it there"
             % (_URL % file_name, name))
    if not os.path.lexists(path):
        raise ModelStoreError("pretrained weights for %s: no file %s (nothing is downloaded here). %s."
                              % (name, path, where))
    try:
        found = _sha1(path)
    except OSError as exc:
        raise ModelStoreError("pretrained weights for %s: cannot read %s (%s). %s."
                              % (name, path, exc.strerror or exc, where)) from None
    if found != _SHA1[name]:
        raise ModelStoreError("pretrained weights for %s: %s is not the file MXNet publishes (its "
                              "SHA-1 differs from %s). %s." % (name, path, _SHA1[name], where))
    return path


def load_pretrained(net, name: str, root=None, ctx=None):
    """Load model ``name``'s pretrained weights into ``net``."""
    net.load_parameters(get_model_file(name, root), ctx=ctx)
    return net
