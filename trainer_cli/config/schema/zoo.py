"""Model-zoo networks in the ``model`` section: ``name: zoo:resnet18_v1``.

The zoo's names come from ``gluon.model_zoo.vision.model_names()``; that package is imported
only when a config names a zoo network, so other configs validate without it.
"""
from __future__ import annotations

from ..suggest import choice_list, did_you_mean
from .base import detail, problem

__all__ = ["ZOO_PREFIX", "is_zoo", "zoo_names", "check_zoo_name", "zoo_arg_details"]

ZOO_PREFIX = "zoo:"


def is_zoo(name: str) -> bool:
    return name.startswith(ZOO_PREFIX)


def zoo_names() -> list[str]:
    from ...gluon.model_zoo import vision
    return vision.model_names()


def check_zoo_name(value: str) -> str:
    """``value`` with its zoo name lower-cased (as ``get_model`` reads it), or a problem with a
    did-you-mean over the zoo's names."""
    name = value[len(ZOO_PREFIX):].lower()
    known = zoo_names()
    if name not in known:
        raise problem(f"unknown model-zoo network {name!r}{did_you_mean(name, known)} "
                      f"(zoo networks: {choice_list(known)})")
    return ZOO_PREFIX + name


def zoo_arg_details(name: str, args: dict) -> list:
    """Problems with ``args`` of the zoo network ``name``, found by building it once (cheap:
    parameters are not allocated before initialization); ``pretrained: true`` is checked
    against the local model store."""
    from ...gluon.model_zoo import vision
    from ...gluon.model_zoo.model_store import ModelStoreError

    zoo = name[len(ZOO_PREFIX):]
    for key, value in args.items():
        if key == "ctx":
            return [detail(("args", "ctx"), "the run places the network (see devices); "
                           "remove ctx", value, "key")]
        if key == "pretrained" and not isinstance(value, bool):
            return [detail(("args", key), f"expected true or false, got {value!r}", value)]
        if key == "classes" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return [detail(("args", key), f"expected a positive integer, got {value!r}", value)]
    try:
        vision.get_model(zoo, **args)
    except ModelStoreError as exc:
        return [detail(("args", "pretrained"), str(exc), args.get("pretrained"))]
    except TypeError as exc:
        text = str(exc)
        bad = [k for k in args if repr(k) in text or f"'{k}'" in text]
        where = ("args", bad[0]) if bad else ("args",)
        return [detail(where, f"{zoo} does not take argument {bad[0]!r}" if bad
                       else f"{zoo}(**args) failed: {text}", args.get(bad[0]) if bad else args,
                       "key" if bad else "value")]
    except (ValueError, KeyError, AssertionError) as exc:
        return [detail(("args",), f"{zoo}(**args) failed: {exc}", args)]
    return []
