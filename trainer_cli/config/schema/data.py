"""The ``data`` section: training and validation sets and how they are batched.

Written in full::

    data:
      train: {type: npz, path: train.npz, x: features, y: label}
      val:   {type: npz, path: val.npz, x: features, y: label}   # or: split: {val_fraction: 0.2}
      batch_size: 64

Shorthands: ``data: train.npz``; ``data: {path: train.npz, batch_size: 64}`` (dataset keys at the
top stand for ``train``); ``train: train.npz``; ``type`` inferred from a .npz/.npy/.csv suffix.
"""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import PurePath
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

import annotated_types as at
from pydantic import Field, PlainValidator, ValidationInfo, WithJsonSchema, field_validator, model_validator

from pydantic_core import InitErrorDetails, PydanticCustomError

from ..describe import Expect
from ..suggest import choice_list, did_you_mean, excerpt
from .base import Seed, Section, detail, fail, problem
from .files import checking_files, csv_header, npy_shape, npz_names, resolve_input
from .images import IMAGE_TYPES, ImageFolderData, ImageRecordData, VisionData
from .text import TextData

__all__ = ["DataSection", "SyntheticData", "RatingsData", "CsrData", "LibSVMData", "NpzData", "NpyData", "CsvData", "SklearnData",
           "SplitSection", "Dataset", "DATASET_TYPES", "SKLEARN_SETS"]

SKLEARN_SETS = ("digits", "iris", "wine", "breast_cancer", "diabetes")
_SUFFIX_TYPES = {".npz": "npz", ".npy": "npy", ".csv": "csv", ".tsv": "csv", ".libsvm": "libsvm",
                 ".svm": "libsvm"}


def _column(value):
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise problem("expected a column name or index")
    return value


Column = Annotated[Any, PlainValidator(_column), Expect("a column name or index"),
                   WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "integer"}]})]


class SyntheticData(Section):
    """Seeded random data: a random linear teacher, for regression or classification."""

    type: Literal["synthetic"]
    task: Literal["regression", "classification"] = "classification"
    num_samples: Annotated[int, at.Ge(1)] = 1000
    num_features: Annotated[int, at.Ge(1)] = 10
    num_classes: Optional[Annotated[int, at.Ge(2)]] = Field(
        None, description="classification only; 2 when not given")
    noise: Annotated[float, at.Ge(0)] = 0.1
    seed: Seed = Field(0, description="seed of the data, independent of the run's seed")

    @model_validator(mode="after")
    def _classes(self):
        if self.task == "classification" and self.num_classes is None:
            self.num_classes = 2
        elif self.task == "regression" and self.num_classes is not None:
            fail("SyntheticData", [detail(("num_classes",), "applies only to task: classification",
                                          self.num_classes, "key")])
        return self


class RatingsData(Section):
    """Seeded synthetic ratings for recommenders: ``(user, item)`` id pairs as features (two
    columns, for an embedding model) and ``rating = <u_user, v_item> + noise`` as labels, from
    random user and item factors of ``rank`` dimensions."""

    type: Literal["ratings"]
    num_users: Annotated[int, at.Ge(1)] = 1000
    num_items: Annotated[int, at.Ge(1)] = 1000
    rank: Annotated[int, at.Ge(1)] = 8
    num_samples: Annotated[int, at.Ge(1)] = 20000
    noise: Annotated[float, at.Ge(0)] = 0.1
    seed: Seed = Field(0, description="seed of the data, independent of the run's seed")


_PATH_DOC = "the file; relative paths are looked up next to the config, then in the working folder"


def _read(probe, path: str):
    """Run a header probe, blaming the ``path`` key when the file cannot be read."""
    try:
        return probe(path)
    except PydanticCustomError as exc:
        fail("data", [InitErrorDetails(type=exc, loc=("path",), input=path)])


class _FileData(Section):
    @field_validator("path", check_fields=False)
    @classmethod
    def _exists(cls, value: str, info: ValidationInfo):
        return resolve_input(value, info, "data file") if checking_files(info) else value


class NpzData(_FileData):
    """Arrays in a NumPy .npz archive: features under ``x``, labels under ``y``."""

    type: Literal["npz"]
    path: str = Field(description=_PATH_DOC)
    x: str = Field("x", description="name of the features array")
    y: str = Field("y", description="name of the labels array")

    @model_validator(mode="after")
    def _arrays(self, info: ValidationInfo):
        if not checking_files(info):
            return self
        stored = _read(npz_names, self.path)
        details = [detail((key,), f"no array {getattr(self, key)!r} in {PurePath(self.path).name}"
                          f"{did_you_mean(getattr(self, key), stored)} (arrays: {choice_list(stored)})",
                          getattr(self, key))
                   for key in ("x", "y") if getattr(self, key) not in stored]
        if details:
            fail("NpzData", details)
        return self


class CsrData(_FileData):
    """Sparse features: a CSR matrix in an .npz as SciPy's ``save_npz`` writes it (``data``,
    ``indices``, ``indptr``, ``shape``; read without SciPy), labels in a .npy file."""

    type: Literal["csr"]
    path: str = Field(description=_PATH_DOC)
    label_path: str = Field(description=".npy file of labels, one per row")

    @field_validator("label_path")
    @classmethod
    def _labels_exist(cls, value, info: ValidationInfo):
        return resolve_input(value, info, "label file") if checking_files(info) else value


class LibSVMData(_FileData):
    """Sparse features and their labels from a LibSVM text file: a line ``label index:value
    index:value ...`` a sample, zero-based indices, as MXNet's LibSVMIter reads them."""

    type: Literal["libsvm"]
    path: str = Field(description=_PATH_DOC)
    num_features: Annotated[int, at.Gt(0)] = Field(
        description="columns of the feature matrix (every index must lie below it)")


class NpyData(_FileData):
    """A 2-D .npy array whose ``label`` column holds the labels, or features and ``label_path``."""

    type: Literal["npy"]
    path: str = Field(description=_PATH_DOC)
    label: Optional[int] = Field(None, description="label column index; -1 (the last) when no "
                                                   "label_path is given")
    label_path: Optional[str] = Field(None, description=".npy file of labels")

    @field_validator("label_path")
    @classmethod
    def _labels_exist(cls, value, info: ValidationInfo):
        if value is None or not checking_files(info):
            return value
        return resolve_input(value, info, "label file")

    @model_validator(mode="after")
    def _layout(self, info: ValidationInfo):
        if self.label_path is not None and self.label is not None:
            fail("NpyData", [detail(("label",), "give either label (a column) or label_path, "
                                    "not both", self.label, "key")])
        if self.label_path is None and self.label is None:
            self.label = -1
        if self.label_path is None and checking_files(info):
            shape = _read(npy_shape, self.path)
            if len(shape) != 2:
                fail("NpyData", [detail(("path",), f"expected a 2-D array with a label column, "
                                        f"got shape {tuple(shape)}; or give label_path", self.path)])
            if not -shape[1] <= self.label < shape[1]:
                fail("NpyData", [detail(("label",), f"expected a column index in "
                                        f"[{-shape[1]}, {shape[1] - 1}], got {self.label}", self.label)])
        return self


class CsvData(_FileData):
    """A delimited text file: ``label`` column and feature ``columns`` (default: all others)."""

    type: Literal["csv"]
    path: str = Field(description=_PATH_DOC)
    label: Column = Field(-1, description="label column, by header name or index")
    columns: Optional[Annotated[list[Column], at.MinLen(1)]] = Field(
        None, description="feature columns by name or index; all but the label when not given")
    delimiter: Annotated[str, at.MinLen(1), at.MaxLen(1)] = ","
    header: bool = Field(True, description="whether the first line holds column names")

    @model_validator(mode="after")
    def _columns(self, info: ValidationInfo):
        if not checking_files(info):
            return self
        first = _read(lambda p: csv_header(p, self.delimiter), self.path)
        width = len(first)
        details = []
        refs = [(("label",), self.label)] + [(("columns", i), c) for i, c in enumerate(self.columns or [])]
        for loc, ref in refs:
            if isinstance(ref, int):
                if not -width <= ref < width:
                    details.append(detail(loc, f"expected a column index in [{-width}, {width - 1}] "
                                          f"({width} columns), got {ref}", ref))
            elif not self.header:
                details.append(detail(loc, f"columns are named only with header: true; "
                                      f"give an index, got {ref!r}", ref))
            elif ref not in first:
                details.append(detail(loc, f"no column {ref!r}{_header_hint(ref, first, self.path)}", ref))
        if details:
            fail("CsvData", details)
        return self


def _header_hint(ref, header: list, path) -> str:
    """The did-you-mean and the column names, when the first line reads as a header of short
    names; a first line that is no header (a file that is not CSV) is never echoed."""
    if len(header) > 64 or any(excerpt(name) is None for name in header):
        return f" (the first line of {PurePath(path).name} is not a header of short column names)"
    return f"{did_you_mean(ref, header)} (columns: {choice_list(header)})"


class SklearnData(Section):
    """A dataset bundled with scikit-learn (which must be installed)."""

    type: Literal["sklearn"]
    name: Literal[SKLEARN_SETS]

    @field_validator("name")
    @classmethod
    def _installed(cls, value):
        if importlib.util.find_spec("sklearn") is None:
            raise problem("needs scikit-learn, which is not installed: pip install scikit-learn "
                          "(or use type: synthetic)")
        return value


DATASET_CLASSES = (SyntheticData, RatingsData, NpzData, NpyData, CsrData, LibSVMData, CsvData,
                   SklearnData,
                   ImageFolderData, ImageRecordData, VisionData, TextData)
DATASET_TYPES = tuple(t for cls in DATASET_CLASSES for t in cls.model_fields["type"].annotation.__args__)
Dataset = Annotated[Union[DATASET_CLASSES], Field(discriminator="type"),
                    Expect("a data file or a mapping with type (" + ", ".join(DATASET_TYPES) + ")")]
_DATASET_KEYS = {k for cls in DATASET_CLASSES for k in cls.model_fields}


def _normalize_dataset(raw):
    if isinstance(raw, str):
        if raw in DATASET_TYPES:
            return {"type": raw}, [((), ("type",))]
        raw, moves = {"path": raw}, [((), ("path",))]
    else:
        moves = []
    if isinstance(raw, dict) and "type" not in raw:
        path = raw.get("path")
        if isinstance(path, str) and PurePath(path).suffix.lower() in _SUFFIX_TYPES:
            suffix = PurePath(path).suffix.lower()
            raw = {"type": _SUFFIX_TYPES[suffix], **raw}
            if suffix == ".tsv" and "delimiter" not in raw:
                raw["delimiter"] = "\t"
        elif path is None and raw.get("name") in SKLEARN_SETS:
            raw = {"type": "sklearn", **raw}
    return raw, moves


class SplitSection(Section):
    """Carve the validation set out of the training set."""

    val_fraction: Annotated[float, at.Gt(0), at.Lt(1)] = Field(
        description="share of the training samples held out for validation")
    shuffle: bool = Field(True, description="pick the held-out samples at random")
    seed: Seed = Field(0, description="seed of that random pick")

    @classmethod
    def normalize(cls, raw):
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return {"val_fraction": raw}, [((), ("val_fraction",))]
        return raw, []


class _DataShorthand(Section):
    """DataSection's shorthand, in a class of its own: ``DataSection`` has a key named
    ``normalize`` (feature scaling), and the shorthand hook of every section has that name too.
    The class keeps the hook (canonicalization reads it from the class), an instance the key."""

    @classmethod
    def normalize(cls, raw):
        moves = []
        if isinstance(raw, str):
            raw, moves = {"train": raw}, [((), ("train",))]
        if not isinstance(raw, dict):
            return raw, moves
        if "train" not in raw and any(k in _DATASET_KEYS for k in raw):
            train = {k: v for k, v in raw.items() if k in _DATASET_KEYS}
            raw = {"train": train, **{k: v for k, v in raw.items() if k not in _DATASET_KEYS}}
            moves += [((k,), ("train", k)) for k in train]
        for key in ("train", "val"):
            if raw.get(key) is not None:
                value, inner = _normalize_dataset(raw[key])
                raw = {**raw, key: value}
                moves += [((key,) + old, (key,) + new) for old, new in inner]
        return raw, moves

# The key shadows _DataShorthand.normalize on purpose (see there).
warnings.filterwarnings("ignore", message='Field name "normalize" in "DataSection" shadows')


class DataSection(_DataShorthand):
    """Training data, optional validation data, and batching."""

    expect_text: ClassVar[str] = "a data file or a mapping with train (and val or split)"

    train: Dataset
    val: Optional[Dataset] = None
    split: Optional[SplitSection] = Field(None, description="hold out part of train for validation")
    batch_size: Annotated[int, at.Ge(1)] = 32
    shuffle: bool = Field(True, description="reshuffle the training set every epoch")
    last_batch: Literal["keep", "discard", "rollover"] = Field(
        "keep", description="what to do with a last batch smaller than batch_size")
    normalize: Literal["none", "standard"] = Field(
        "none", description="feature scaling: standard subtracts each feature's mean and divides "
                            "by its standard deviation, both fitted on the training split, saved "
                            "with the run (feature_scaling.npz) and applied to validation data "
                            "and to what evaluate and predict feed the model (dense features "
                            "only)")
    num_workers: Annotated[int, at.Ge(0), at.Le(64)] = Field(
        0, description="worker processes decoding and transforming images (image data only); "
                       "the batches are the same bits with any number")

    @model_validator(mode="after")
    def _one_val_source(self):
        if self.val is not None and self.split is not None:
            fail("DataSection", [detail(("split",), "give either data.val or data.split, not both",
                                        None, "key")])
        return self

    @model_validator(mode="after")
    def _kinds_agree(self):
        details = []
        text = self.train.type == "text"
        if self.val is not None and (self.val.type == "text") != text:
            details.append(detail(("val", "type"), "train and val must both be text, or neither "
                                  f"(train is {self.train.type})", self.val.type))
        if text and self.shuffle and "shuffle" in self.model_fields_set:
            details.append(detail(("shuffle",), "a language model reads its text in order (its "
                                  "state carries from batch to batch): shuffle must be false",
                                  self.shuffle))
        if text and self.split is not None and self.split.shuffle \
                and "shuffle" in self.split.model_fields_set:
            details.append(detail(("split", "shuffle"), "text is split at its end: shuffle must "
                                  "be false", self.split.shuffle))
        if self.num_workers and self.train.type not in IMAGE_TYPES:
            details.append(detail(("num_workers",), "applies only to image data "
                                  f"({', '.join(IMAGE_TYPES)})", self.num_workers))
        if self.normalize != "none" and (text or self.train.type in IMAGE_TYPES):
            details.append(detail(("normalize",), "applies to feature arrays; image data is "
                                  "scaled by its transforms (normalize), text has token ids",
                                  self.normalize))
        if details:
            fail("DataSection", details)
        if text:
            self.shuffle = False
        return self

    @property
    def has_validation(self) -> bool:
        return self.val is not None or self.split is not None
