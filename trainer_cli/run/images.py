"""Image data for the runner: samples decoded and transformed when a batch reads them.

:class:`ImageRows` stands where the features array of other data sets stands (``Arrays.x``):
``rows[index]`` is the float32 batch of those samples after the config's transforms. Random
transforms draw from a stream of their own for every sample, keyed by ``(seed, epoch,
sample)`` (:class:`trainer_cli.random.cpu_stream`), so a sample's augmentation is a pure
function of the run's seed, the epoch and the sample: the same bits whichever batch, thread,
worker process or resumed session makes it, and the run's own random stream (dropout, ...) is
not touched. The training loop reads the next batch on a thread while a step computes;
``num_workers`` worker processes share a batch's samples; they are forked, once, when the
first batch is read.
"""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import weakref

import numpy

from .. import random as _random
from .._pools import close_pool, leave_stops_to_parent
from ..gluon.data.dataset import RecordFileDataset
from ..ndarray import array as _nd_array
from ..recordio import IR_HEADER_BYTES, MXIndexedRecordIO, RecordIOError, unpack
from .data import Arrays, DataError

__all__ = ["ImageRows", "load_images"]

# A worker's batch share that has not come back in this many seconds ends the run (a stuck
# decoder must not hang it).
WORKER_TIMEOUT_S = 300
# Decoded images kept in memory per process (an image folder's or a record file's; in-memory
# sets are arrays).
DECODED_BYTES = 512 << 20
# Bytes of an image folder's (or record file's) files read for the data fingerprint (beyond it:
# names and sizes).
FINGERPRINT_BYTES = 256 << 20


def build_transform(sections, where: str):
    """The gluon transform (a Compose) of a config's transform list (None: to_tensor)."""
    from ..config.schema.images import TRANSFORMS
    from ..gluon.data.vision import transforms as T

    blocks = []
    for i, section in enumerate(sections if sections is not None else [None]):
        name = "to_tensor" if section is None else section.name
        params = {} if section is None else dict(section.params)
        for key in ("size", "scale", "ratio", "mean", "std"):
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        try:
            blocks.append(getattr(T, TRANSFORMS[name][0])(**params))
        except (TypeError, ValueError) as exc:
            raise DataError("%s.transforms.%d: cannot make %s: %s" % (where, i, name, exc)) from None
    return T.Compose(blocks)


class Transformer:
    """A config's transforms (a Compose) on NumPy images, in two parts: ``sample`` runs a
    sample's transforms inside its keyed random stream; ``batch`` makes the float32 batch of
    such samples. Where every transform works on the NumPy image, no NDArray is made, and the
    trailing ``ToTensor`` and ``Normalize`` (element by element, drawing nothing) run once on
    the stacked batch, which gives each sample's very bits at a fraction of the calls."""

    def __init__(self, compose):
        from ..gluon.data.vision import transforms as T

        self.compose = compose
        self._apply = T.apply_on_host    # looked up once: sample() runs for every image
        chain = T.host_chain(compose)
        cut = len(chain) if chain is not None else 0
        while cut and isinstance(chain[cut - 1], (T.ToTensor, T.Normalize)):
            cut -= 1
        self.each = None if chain is None else chain[:cut]
        self.tail = [] if chain is None else chain[cut:]

    def sample(self, image, key):
        with _random.cpu_stream(key):
            if self.each is not None:
                return self._apply(self.each, image)
            out = self.compose(_nd_array(image, dtype=image.dtype))
        return out.asnumpy()

    def batch(self, samples) -> numpy.ndarray:
        shapes = {s.shape for s in samples}
        if len(shapes) > 1:
            raise DataError("images of different sizes after the transforms (%s): add a resize "
                            "or crop transform" % ", ".join(str(s) for s in sorted(shapes)))
        return self._apply(self.tail, numpy.stack(samples)).astype(numpy.float32, copy=False)


class _Source:
    """Where the raw images are: a uint8 array (N, H, W, C) in memory, files decoded when read,
    or the records of a RecordIO file (``records``: its ``RecordFileDataset``) decoded when
    read."""

    def __init__(self, images=None, files=None, gray=False, records=None):
        self.images, self.files, self.gray, self.records = images, files, gray, records
        self._decoded: dict = {}
        self._kept = 0

    def __len__(self):
        if self.images is not None:
            return len(self.images)
        return len(self.records) if self.records is not None else len(self.files)

    @property
    def paths(self):
        """The files the images come from (for the data fingerprint)."""
        if self.records is not None:
            return [self.records.filename, self.records.idx_file]
        return self.files

    def image(self, position):
        if self.images is not None:
            return self.images[position]
        kept = self._decoded.get(position)
        if kept is not None:
            return kept
        from ..gluon.data.vision.image_file import ImageFileError, imdecode, imread

        try:
            if self.records is not None:
                encoded = unpack(self.records[position])[1]
                image = imdecode(encoded, 0 if self.gray else 1,
                                 "%s, record %d" % (self.records.filename, position))
            else:
                image = imread(self.files[position], 0 if self.gray else 1)
        except (ImageFileError, RecordIOError, ImportError) as exc:
            raise DataError(str(exc)) from None
        # Decoded images are kept up to a budget: a small set is decoded once, not every epoch.
        if self._kept + image.nbytes <= DECODED_BYTES:
            self._decoded[position] = image
            self._kept += image.nbytes
        return image


# A forked worker's source and transform, set when it starts.
_worker = None


def _worker_init(source, transformer, parent):
    global _worker
    _worker = (source, transformer)
    leave_stops_to_parent(parent)


def _worker_samples(task):
    source, transformer = _worker
    return [transformer.sample(source.image(p), key) for p, key in task]


class ImageRows:
    """The transformed samples of an image set, read by index like a features array."""

    dtype = numpy.dtype(numpy.float32)
    lazy_rows = True     # Arrays.take keeps it unread

    def __init__(self, source, transform, random, positions=None, seed=0, num_workers=0):
        self._source = source
        self._transformer = Transformer(transform)
        self.random = random                 # whether any transform draws random numbers
        self.positions = numpy.arange(len(source)) if positions is None else positions
        self.seed = int(seed)
        self.epoch = 0
        self.num_workers = int(num_workers)
        self._pool = None
        if self.num_workers:
            # Forked now, while the run is being built: a worker must not inherit the run
            # directory's lock (taken later), which it would hold after the run ends.
            self._worker_pool()
        first = self._sample(0)
        self.shape = (len(self.positions),) + first.shape
        self.ndim = len(self.shape)

    def __len__(self):
        return len(self.positions)

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose augmentations reads make (the loop sets it before every step)."""
        self.epoch = int(epoch)

    def _key(self, position):
        return [self.seed, self.epoch, int(position)]

    def _sample(self, i):
        position = int(self.positions[i])
        return self._transformer.batch(
            [self._transformer.sample(self._source.image(position), self._key(position))])[0]

    def __getitem__(self, index) -> numpy.ndarray:
        rows = self.positions[index]
        rows = numpy.atleast_1d(rows)
        tasks = [(int(p), self._key(p)) for p in rows]
        if self.num_workers and tasks:
            samples = self._from_workers(tasks)
        else:
            samples = [self._transformer.sample(self._source.image(p), key) for p, key in tasks]
        if not samples:
            return numpy.zeros((0,) + self.shape[1:], dtype=numpy.float32)
        return self._transformer.batch(samples)

    def _from_workers(self, tasks):
        pool = self._worker_pool()
        parts = numpy.array_split(numpy.arange(len(tasks)), min(self.num_workers, len(tasks)))
        pending = [pool.apply_async(_worker_samples, ([tasks[i] for i in part],))
                   for part in parts if len(part)]
        samples = []
        for result in pending:
            try:
                samples += result.get(WORKER_TIMEOUT_S)
            except multiprocessing.TimeoutError:
                raise DataError("an image worker gave no samples within %d s"
                                % WORKER_TIMEOUT_S) from None
        return samples

    def _worker_pool(self):
        if self._pool is None:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
            self._pool = multiprocessing.get_context(method).Pool(
                self.num_workers, initializer=_worker_init,
                initargs=(self._source, self._transformer, os.getpid()))
            weakref.finalize(self, close_pool, self._pool)
        return self._pool

    def close(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            close_pool(pool)

    def take(self, index) -> "ImageRows":
        """The samples ``index`` of this set, still unread (a validation split)."""
        rows = ImageRows.__new__(ImageRows)
        rows.__dict__.update(self.__dict__)
        rows.positions = self.positions[index]
        rows.shape = (len(rows.positions),) + self.shape[1:]
        return rows    # sharing the workers: they hold the same source and transforms

    def fingerprint(self) -> bytes:
        """What identifies the images (the bytes of the files, or of the arrays) for a resume's
        check that the data has not changed."""
        digest = hashlib.sha256()
        digest.update(self.positions.tobytes())
        source = self._source
        if source.images is not None:
            digest.update(str(source.images.shape).encode())
            digest.update(memoryview(numpy.ascontiguousarray(source.images)).cast("B"))
            return digest.digest()
        budget = FINGERPRINT_BYTES
        for path in source.paths:
            digest.update(os.fsencode(path))
            try:
                size = os.stat(path).st_size
                digest.update(str(size).encode())
                if size <= budget:
                    with open(path, "rb") as f:
                        digest.update(f.read(size))
                    budget -= size
            except OSError as exc:
                raise DataError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
        return digest.digest()


def _record_labels(records) -> numpy.ndarray:
    """Each record's class label, from its header (one number per record); only the headers
    are read, not the images."""
    labels = numpy.empty(len(records), dtype=numpy.float32)
    with MXIndexedRecordIO(records.idx_file, records.filename, "r") as reader:
        for k, key in enumerate(reader.keys):
            head = reader.read_idx_head(key, IR_HEADER_BYTES)
            count = int.from_bytes(head[:4], "little")    # the header's flag: labels after it
            if count:
                head = reader.read_idx_head(key, IR_HEADER_BYTES + 4 * count)
            label = numpy.ravel(numpy.asarray(unpack(head)[0].label, dtype=numpy.float32))
            if label.size != 1:
                raise DataError("%s, record %d: %d labels in its header; a run trains on one "
                                "class label per image" % (records.filename, k, label.size))
            labels[k] = label[0]
    return labels


def load_images(spec, seed=0, num_workers=0, where="data") -> Arrays:
    """The Arrays of an image data set section (image_folder, mnist, ...): labels in memory,
    features an :class:`ImageRows`."""
    from ..gluon.data.vision import datasets

    try:
        if spec.type == "image_folder":
            found = datasets.ImageFolderDataset(spec.path, flag=0 if spec.gray else 1)
            if not found.items:
                raise DataError("%s: no .jpg, .jpeg or .png images in class sub-folders"
                                % spec.path)
            source = _Source(files=[f for f, _ in found.items], gray=spec.gray)
            labels = numpy.array([label for _, label in found.items], dtype=numpy.float32)
        elif spec.type == "image_record":
            records = RecordFileDataset(spec.path)
            if not len(records):
                raise DataError("%s: no records in its index %s" % (spec.path, records.idx_file))
            source = _Source(records=records, gray=spec.gray)
            labels = _record_labels(records)
        else:
            cls = {"mnist": datasets.MNIST, "fashion_mnist": datasets.FashionMNIST,
                   "cifar10": datasets.CIFAR10, "cifar100": datasets.CIFAR100}[spec.type]
            kwargs = {"fine_label": spec.fine_label} if spec.type == "cifar100" else {}
            found = cls(root=spec.root, train=spec.part == "train", **kwargs)
            images, labels = found.as_numpy()
            source = _Source(images=images)
            labels = labels.astype(numpy.float32)
    except (datasets.DatasetFileError, RecordIOError, OSError) as exc:
        raise DataError("%s: %s" % (where, exc)) from None
    transforms = spec.transforms
    random = any(t.is_random for t in transforms or [])
    transform = build_transform(transforms, where)
    return Arrays(ImageRows(source, transform, random, seed=seed, num_workers=num_workers), labels)
