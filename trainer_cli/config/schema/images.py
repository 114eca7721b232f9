"""Image data sets in the ``data`` section: a folder of images per class, a RecordIO file of
packed images (MXNet's ``im2rec``), or one of the vision sets MXNet reads from local files, each
with a list of transforms::

    data:
      train:
        type: image_folder
        path: images/train          # one sub-folder per class
        transforms: [{name: resize, size: 32}, random_flip_left_right, to_tensor,
                     {name: normalize, mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}]
      val: {type: cifar10, root: ~/.mxnet/datasets/cifar10, part: test}
      # or: {type: image_record, path: data/val.rec}   (val.idx beside it)

Transforms are ``gluon.data.vision.transforms`` by snake-case name; without ``transforms`` a
sample goes through ``to_tensor`` only (uint8 HWC image -> float32 CHW in [0, 1]).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

import annotated_types as at
from pydantic import Field, ValidationInfo, field_validator, model_validator

from .. import names
from ..suggest import show
from .base import Section, Shorthand, detail, fail, problem
from .component import NamedComponent
from .files import _bases, checking_files, resolve_input

__all__ = ["TransformSection", "ImageFolderData", "ImageRecordData", "VisionData", "TRANSFORMS",
           "VISION_SETS"]

Positive = Annotated[float, at.Gt(0)]
NonNegative = Annotated[float, at.Ge(0)]
Size = Union[Annotated[int, at.Ge(1)], Annotated[list[Annotated[int, at.Ge(1)]], at.Len(2, 2)]]
PerChannel = Union[float, Annotated[list[float], at.MinLen(1), at.MaxLen(4)]]
Range = Annotated[list[Positive], at.Len(2, 2)]

# Config name -> (class in gluon.data.vision.transforms, accepted arguments, required ones).
TRANSFORMS = {
    "to_tensor": ("ToTensor", (), ()),
    "normalize": ("Normalize", ("mean", "std"), ()),
    "cast": ("Cast", ("dtype",), ()),
    "resize": ("Resize", ("size", "keep_ratio", "interpolation"), ("size",)),
    "center_crop": ("CenterCrop", ("size", "interpolation"), ("size",)),
    "random_resized_crop": ("RandomResizedCrop", ("size", "scale", "ratio", "interpolation"),
                            ("size",)),
    "random_flip_left_right": ("RandomFlipLeftRight", (), ()),
    "random_flip_top_bottom": ("RandomFlipTopBottom", (), ()),
    "random_brightness": ("RandomBrightness", ("brightness",), ("brightness",)),
    "random_contrast": ("RandomContrast", ("contrast",), ("contrast",)),
    "random_saturation": ("RandomSaturation", ("saturation",), ("saturation",)),
    "random_hue": ("RandomHue", ("hue",), ("hue",)),
    "random_color_jitter": ("RandomColorJitter", ("brightness", "contrast", "saturation", "hue"),
                            ()),
    "random_lighting": ("RandomLighting", ("alpha",), ("alpha",)),
}
_TYPES = {"mean": PerChannel, "std": PerChannel, "dtype": Literal["float32", "float64", "float16"],
          "size": Size, "keep_ratio": bool, "interpolation": Annotated[int, at.Ge(0), at.Le(4)],
          "scale": Range, "ratio": Range, "brightness": NonNegative, "contrast": NonNegative,
          "saturation": NonNegative, "hue": NonNegative, "alpha": NonNegative}
VISION_SETS = ("mnist", "fashion_mnist", "cifar10", "cifar100")


def _spec(name):
    entry = TRANSFORMS.get(name)
    return None if entry is None else names.ParamSpec(frozenset(entry[1]), frozenset(entry[2]))


class TransformSection(NamedComponent):
    """One image transform of gluon.data.vision.transforms, by snake-case name, with its
    arguments (``{name: resize, size: 32}``)."""

    expect_text: ClassVar[str] = "a transform name or a mapping with name and its arguments"
    what: ClassVar[str] = "transform"
    choices: ClassVar = staticmethod(lambda: sorted(TRANSFORMS))
    spec: ClassVar = staticmethod(_spec)
    types: ClassVar[dict] = _TYPES

    name: str = Field(description="to_tensor, normalize, resize, center_crop, random_resized_crop, "
                                  "random_flip_left_right, random_color_jitter, ... (trainer list)")
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True,
                                   description="arguments of the transform, e.g. size, mean, std")

    @property
    def is_random(self) -> bool:
        return self.name.startswith("random_")


Transforms = Optional[list[Annotated[TransformSection, Shorthand()]]]
_TRANSFORMS_DOC = ("transforms applied to each image in order; random ones are seeded from the "
                   "run's seed, the epoch and the sample, so a resumed run sees the same "
                   "augmentations (default: [to_tensor])")


def _folder(value: str, info: ValidationInfo) -> str:
    """The absolute path of an existing folder, looked up as input files are."""
    path = Path(os.path.expanduser(value))
    candidates = [path] if path.is_absolute() else [base / path for base in _bases(info)]
    for c in candidates:
        try:
            if c.is_dir():
                return str(c.resolve())
            if c.exists():
                raise problem(f"expected a folder of images, got the file {show(value)}")
        except OSError as exc:
            raise problem(f"cannot use {show(value)} as a folder: {exc.strerror or exc}") from None
    where = "" if path.is_absolute() else " (looked in " + " and ".join(
        f"'{c.parent}'" for c in candidates) + ")"
    raise problem(f"image folder {show(value)} not found{where}")


class ImageFolderData(Section):
    """Images in one sub-folder per class (``path/cat/001.png``): class i is the i-th
    sub-folder in sorted order; .jpg, .jpeg and .png files are read (decoded by Pillow)."""

    type: Literal["image_folder"]
    path: str = Field(description="the folder of class sub-folders; relative paths are looked up "
                                  "next to the config, then in the working folder")
    gray: bool = Field(False, description="decode as one gray channel instead of RGB")
    transforms: Transforms = Field(None, description=_TRANSFORMS_DOC)

    @field_validator("path")
    @classmethod
    def _exists(cls, value: str, info: ValidationInfo):
        return _folder(value, info) if checking_files(info) else value


class ImageRecordData(Section):
    """Images packed in a RecordIO file, as MXNet's im2rec writes them (``train.rec`` with its
    index ``train.idx`` beside it): each record an encoded image (.jpg, .png) and its header's
    class label."""

    type: Literal["image_record"]
    path: str = Field(description="the .rec file (its .idx beside it); relative paths are looked "
                                  "up next to the config, then in the working folder")
    gray: bool = Field(False, description="decode as one gray channel instead of RGB")
    transforms: Transforms = Field(None, description=_TRANSFORMS_DOC)

    @field_validator("path")
    @classmethod
    def _exists(cls, value: str, info: ValidationInfo):
        if not checking_files(info):
            return value
        path = resolve_input(value, info, "record file")
        index = os.path.splitext(path)[0] + ".idx"
        if not os.path.isfile(index):
            raise problem(f"the record file {show(value)} has no index beside it: expected "
                          f"{show(index)} (MXNet's im2rec writes both)")
        return path


class VisionData(Section):
    """MNIST, Fashion-MNIST, CIFAR-10 or CIFAR-100 from the local files MXNet reads (idx .gz
    files; CIFAR binary batches); nothing is downloaded."""

    type: Literal[VISION_SETS]
    root: Optional[str] = Field(None, description="the folder of the data set's files (default: "
                                                  "MXNet's, ~/.mxnet/datasets/<name>)")
    part: Literal["train", "test"] = Field("train", description="which part of the data set")
    fine_label: bool = Field(False, description="cifar100 only: the 100 fine classes instead of "
                                                "the 20 coarse ones")
    transforms: Transforms = Field(None, description=_TRANSFORMS_DOC)

    @field_validator("root")
    @classmethod
    def _root(cls, value, info: ValidationInfo):
        if value is None or not checking_files(info):
            return value
        return _folder(value, info)

    @model_validator(mode="after")
    def _fine(self):
        if self.fine_label and self.type != "cifar100":
            fail("VisionData", [detail(("fine_label",), "applies only to type: cifar100",
                                       self.fine_label, "key")])
        return self


IMAGE_TYPES = ("image_folder", "image_record") + VISION_SETS
