"""The ``model`` section: which network to build, with what arguments and initializer."""
from __future__ import annotations

import re
from pathlib import PurePath
from typing import Annotated, Any, ClassVar, Literal, Optional

import annotated_types as at

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .. import names
from ..suggest import choice_list, did_you_mean
from .base import Section, Shorthand, ctx_value, detail, fail, named_shorthand, problem
from .component import NamedComponent
from .files import (checking_files, factory_arg_kinds, factory_params, resolve_input,
                    resolve_source, top_level_names)
from .hyperparams import INITIALIZER
from .zoo import check_zoo_name, is_zoo, zoo_arg_details

__all__ = ["ModelSection", "InitSection"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a file in models/ is expected to define; args are checked against it when it does.
MODEL_FACTORY = "build"


class InitSection(NamedComponent):
    """How parameters are initialised: an initializer name and its arguments."""

    expect_text: ClassVar[str] = "an initializer name or a mapping with name and params"
    what: ClassVar[str] = "initializer"
    choices: ClassVar = staticmethod(names.initializer_names)
    spec: ClassVar = staticmethod(names.initializer_params)
    types: ClassVar[dict] = INITIALIZER

    name: str = Field(description="uniform, normal, xavier, msraprelu, orthogonal, constant, ...")
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True,
                                   description="keyword arguments, e.g. scale, magnitude")


class ModelSection(Section):
    """The network: a file in ``models/`` by name, or ``path/to/file.py:factory``."""

    expect_text: ClassVar[str] = "a model name or a mapping with name, args, init and dtype"

    name: str = Field(description="a model in models/ by file name (mlp), path/to/file.py:factory, "
                                  "or a model-zoo network, zoo:resnet18_v1 (see trainer list)")
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    init: Annotated[InitSection, Shorthand()] = Field(
        default_factory=lambda: InitSection(name="uniform"),
        description="parameter initializer; MXNet's default is uniform with scale 0.07")
    dtype: Literal["float32", "float64", "float16"] = Field(
        "float32", description="parameter dtype (float16: see precision for loss scaling)")
    init_from: Optional[Annotated[str, at.MinLen(1)]] = Field(
        None, description="start from these weights: a checkpoint of another run "
                          "(runs/x/checkpoints/best, .../latest, .../step-N, or the run directory: "
                          "its best checkpoint, else its latest), an MXNet .params file or an .npz "
                          "of parameters by structural name; init still draws the parameters it "
                          "does not hold. A resumed run continues from its own checkpoint instead")
    allow_missing: bool = Field(
        False, description="with init_from: parameters the file lacks keep their init values "
                           "(otherwise an error)")
    ignore_extra: bool = Field(
        False, description="with init_from: arrays of the file the model has no parameter for "
                           "are ignored (otherwise an error)")
    freeze: list[Annotated[str, at.MinLen(1)]] = Field(
        default_factory=list, description="parameters that are not trained, by glob pattern "
                                          "over their structural names, e.g. ['features.*']: "
                                          "grad_req null, left out of the optimizer")
    hybridize: bool = Field(
        True, description="run the network from a cached plan after its first step, as "
                          "HybridBlock.hybridize() does (the same numbers; networks or layers a "
                          "plan cannot hold run as written); false: always layer by layer")
    lr_mult: dict[str, Annotated[float, at.Gt(0)]] = Field(
        default_factory=dict, description="learning-rate multipliers by glob pattern over "
                                          "parameter names, e.g. {'output.*': 10}")

    @classmethod
    def normalize(cls, raw):
        return named_shorthand(raw, "name")

    @field_validator("name")
    @classmethod
    def _find(cls, value: str, info: ValidationInfo):
        if is_zoo(value):
            return check_zoo_name(value)
        if ":" in value:
            return _factory_in_file(value, info)
        if not _IDENT.match(value):
            raise problem(f"expected a model name from models/ or path/to/file.py:factory, got {value!r}")
        if not checking_files(info):
            return value
        found = names.model_files(ctx_value(info, "config_dir"))
        if value in found:
            return value
        if not found:
            raise problem(f"unknown model {value!r}: no models/ folder found next to the config, "
                          "beside its folder or in the working directory; "
                          "give path/to/file.py:factory instead")
        raise problem(f"unknown model {value!r}{did_you_mean(value, found)} "
                      f"(models: {choice_list(sorted(found))}; or give path/to/file.py:factory)")

    @field_validator("init_from")
    @classmethod
    def _find_source(cls, value, info: ValidationInfo):
        if value is None or not checking_files(info):
            return value
        return resolve_source(value, info)

    @field_validator("lr_mult", mode="before")
    @classmethod
    def _whole_numbers(cls, value):
        # {'output.*': 10}: a multiplier, written as an integer, is a number all the same.
        if isinstance(value, dict):
            return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
                    for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _loading_options(self):
        details = [detail((key,), f"{key} applies to the weights of init_from, which is not "
                          "given", True, "key")
                   for key in ("allow_missing", "ignore_extra")
                   if getattr(self, key) and self.init_from is None]
        if details:
            fail("ModelSection", details)
        return self

    @model_validator(mode="after")
    def _args_match_factory(self, info: ValidationInfo):
        if not checking_files(info) or not self.args:
            return self
        if is_zoo(self.name):
            details = zoo_arg_details(self.name, self.args)
            if details:
                fail("ModelSection", details)
            return self
        if ":" in self.name:
            file, _, factory = self.name.rpartition(":")
        else:
            file = names.model_files(ctx_value(info, "config_dir")).get(self.name)
            factory = MODEL_FACTORY
        accepted = factory_params(str(file), factory) if file else None
        if accepted is None:
            return self
        shown = f"{factory}() in {PurePath(file).name}"
        listed = f" (arguments: {choice_list(accepted) or 'none'})"
        details = [detail(("args", key), f"unknown argument of {shown}"
                          + (did_you_mean(key, accepted) or listed), value, "key")
                   for key, value in self.args.items() if key not in accepted]
        # ``hidden: 64``, ``classes: four``: caught here rather than as a TypeError mid-run.
        kinds = factory_arg_kinds(str(file), factory)
        details += [detail(("args", key), f"{shown} takes {_KIND_TEXT[kinds[key]]} for {key}, "
                           f"got {value!r}", value, "value")
                    for key, value in self.args.items()
                    if key in kinds and not _fits(value, kinds[key])]
        if details:
            fail("ModelSection", details)
        return self


_KIND_TEXT = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
              "list": "a list"}


def _fits(value, kind: str) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"str": str, "bool": bool, "list": list}[kind])


def _factory_in_file(value: str, info) -> str:
    file, _, factory = value.rpartition(":")
    if not file.endswith(".py") or not _IDENT.match(factory):
        raise problem(f"expected path/to/file.py:factory, got {value!r}")
    if not checking_files(info):
        return value
    path = resolve_input(file, info, "model file")
    defined = top_level_names(path)
    if factory not in defined:
        raise problem(f"{file} defines no {factory!r}{did_you_mean(factory, defined)}")
    return f"{path}:{factory}"
