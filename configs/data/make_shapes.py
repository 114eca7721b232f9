"""Writes a small image-folder data set of PNG files: 16x16 RGB pictures of three shapes
(a horizontal bar, a vertical bar, a square), each in a random colour and place on a noisy
background of another colour, one sub-folder per class:

    shapes/train/{hbar,vbar,square}/NNN.png     (40 per class)
    shapes/val/{hbar,vbar,square}/NNN.png       (10 per class)

and the same images packed as MXNet's im2rec packs them (the PNG files' bytes, the class index in
each record's header, classes and files in sorted order): shapes/train.rec with shapes/train.idx,
shapes/val.rec with shapes/val.idx.

configs/image_folder.yaml and configs/zoo_shapes.yaml train on the folders,
configs/image_record.yaml on the record files. Seeded: the same files every
time. Needs Pillow (pip install 'trainer-cli[vision]'). Run from this folder, or give the
folder to write into:

    python make_shapes.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from PIL import Image

SIZE, SEED = 16, 3
COUNTS = {"train": 40, "val": 10}
CLASSES = ("hbar", "vbar", "square")


def picture(rng, shape):
    background = rng.integers(0, 100, size=3)
    colour = rng.integers(140, 256, size=3)
    img = background + rng.integers(-20, 21, size=(SIZE, SIZE, 3))
    long, thick = rng.integers(8, 14), rng.integers(2, 4)
    if shape == "square":
        long = thick = rng.integers(5, 9)
    h, w = (thick, long) if shape == "hbar" else (long, thick)
    top, left = rng.integers(0, SIZE - h + 1), rng.integers(0, SIZE - w + 1)
    img[top:top + h, left:left + w] = colour
    return np.clip(img, 0, 255).astype(np.uint8)


def pack_records(part_folder, rec_path):
    """The images of ``part_folder`` (one sub-folder per class) as a RecordIO file and its
    index, in ImageFolderDataset's order."""
    from trainer_cli import recordio

    idx_path = str(rec_path)[:-len(".rec")] + ".idx"
    with recordio.MXIndexedRecordIO(idx_path, str(rec_path), "w") as records:
        key = 0
        for label, folder in enumerate(sorted(p for p in Path(part_folder).iterdir()
                                              if p.is_dir())):
            for image in sorted(folder.glob("*.png")):
                header = recordio.IRHeader(0, float(label), key, 0)
                records.write_idx(key, recordio.pack(header, image.read_bytes()))
                key += 1


def main(out=Path(__file__).resolve().parent / "shapes"):
    rng = np.random.default_rng(SEED)
    for part, count in COUNTS.items():
        for label, shape in enumerate(CLASSES):
            folder = Path(out) / part / shape
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                Image.fromarray(picture(rng, shape)).save(folder / ("%03d.png" % i))
        pack_records(Path(out) / part, Path(out) / (part + ".rec"))
    return Path(out)


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
