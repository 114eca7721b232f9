"""An image input pipeline: a folder of small PNGs through ImageFolderDataset, RandomResizedCrop,
RandomFlipLeftRight, ToTensor, Normalize and DataLoader(num_workers=2, batch_size=64), ours
against torchvision's ImageFolder and torch's DataLoader with the same transforms and workers.

    python benchmarks/bench_pipeline.py                        # 10,000 32x32 PNGs, 2 workers
    python benchmarks/bench_pipeline.py --rounds 3 --images 10000 --workers 2 --size 32
    python benchmarks/bench_pipeline.py --dir /tmp/pngs        # keep the images for next time
    python benchmarks/bench_pipeline.py --runner               # the runner's wait for data

The images (``--images`` RGB PNGs of ``--size`` pixels square in 10 class folders, smooth
gradients with noise, made with Pillow) are written once into a temporary folder (or ``--dir``,
reused when it already holds them) and read by every round. Each side runs in a process of its
own (``_calibrate.peer_env``: nothing inherited, one BLAS/OpenMP thread): ours is
``gluon.data.vision.ImageFolderDataset(root).transform_first(Compose([...]))`` with
``gluon.data.DataLoader(..., shuffle=True, num_workers=N)``; torchvision is what its users write:
``datasets.ImageFolder(root, transform=...)`` with ``torch.utils.data.DataLoader(...,
shuffle=True, num_workers=N, persistent_workers=True)``, with the v1 transforms
(``RandomResizedCrop``, ``RandomHorizontalFlip``, ``ToTensor``, ``Normalize``) and with the v2
ones (``ToImage`` + ``ToDtype(float32, scale=True)`` in place of ``ToTensor``), each a side.

Every side checks its first batches before timing (one process, no workers): shape
(64, 3, size, size) float32, values finite within the range Normalize gives [0, 1], integer
labels of the ten classes. Then it times two epochs of one loader: the first from a fresh
loader, worker start-up included ("cold"; the time to the first batch is reported as start-up),
the second with the workers already running ("warm": the steady rate). A rate is images per
second of wall time, or with ``--clock cpu`` images per CPU-second of the whole process tree
(the main process and its workers, from /proc), which a machine shared with other work
disturbs less. Rounds alternate the order of the sides; a ratio is the median of the rounds' own
ratios (ours over the peer measured next to it).

torchvision: the wheel this machine's package index holds (0.28.0) is the CUDA build, whose C
operators cannot load beside torch 2.13.0+cpu, and its import then fails while registering meta
kernels for them (detection operators such as ``nms``). The peer's process imports it through
``_calibrate.import_torchvision``, which puts empty modules in place of the two that register
them: nothing the pipeline runs uses those operators (ImageFolder decodes with Pillow and
the transforms are Python over Pillow and torch). With a CPU build of torchvision that loads its
operators, nothing is replaced.

Target: ours >= 1.0x torchvision (both transform versions), warm and cold.

``--runner`` measures instead how much of the runner's step time goes to waiting for data:
``trainer run`` on ``configs/image_folder.yaml`` (its 120 training images of 16x16 made by
``configs/data/make_shapes.py``, a small CNN, batches of 16) and on the benchmark's image folder
(a CNN of 3x3 convolutions with 16 and 32 channels on 32x32, RandomResizedCrop + flip + ToTensor
+ Normalize, batches of 64, two epochs), each with ``data.num_workers`` 0 and ``--workers``. The
figures are the run's own: every epoch row's ``data_wait_s`` (the seconds the training thread
waited for its batches' features) against its ``step_s`` (the seconds of the epoch's steps).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402  (benchmarks/ is not a package)

CLASSES = 10
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
SIDES = ("ours", "torchvision-v1", "torchvision-v2")

WORKER = r'''
import json, os, sys, time
side, root, workers, batch, size, here = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                          int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
MEAN, STD = json.loads(sys.argv[7]), json.loads(sys.argv[8])
sys.path.insert(0, here)
import _calibrate

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid=None):
    """CPU seconds (user + system) of this process and every live descendant (its workers)."""
    pid = pid or os.getpid()
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass     # a process that ended meanwhile
    return total


extra = {}
if side == "ours":
    from trainer_cli import gluon, nd
    import numpy as np
    T = gluon.data.vision.transforms
    transform = T.Compose([T.RandomResizedCrop(size), T.RandomFlipLeftRight(), T.ToTensor(),
                           T.Normalize(MEAN, STD)])
    dataset = gluon.data.vision.ImageFolderDataset(root).transform_first(transform)

    def loader(n):
        return gluon.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=n)

    def host(batch):
        return batch[0].asnumpy(), batch[1].asnumpy()
    record = lambda: _calibrate.describe(side, nd=nd)
else:
    import torch
    # The CUDA build of torchvision beside torch+cpu (see the benchmark's docstring).
    torchvision, note = _calibrate.import_torchvision()
    if note:
        extra["torchvision_ops"] = note
    import PIL
    extra["torchvision"] = torchvision.__version__
    extra["Pillow"] = PIL.__version__
    torch.set_num_threads(1)
    if side == "torchvision-v1":
        from torchvision import transforms as T
        transform = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                               T.Normalize(MEAN, STD)])
    else:
        from torchvision.transforms import v2 as T
        transform = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToImage(),
                               T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(root, transform=transform)

    def loader(n):
        return torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=n,
                                           persistent_workers=n > 0)

    def host(batch):
        return batch[0].numpy(), batch[1].numpy()

    def record():
        rec = _calibrate.describe(side, torch=torch)
        rec["extra"] = extra
        return rec

import numpy as np
low = min((0 - m) / s for m, s in zip(MEAN, STD)) - 1e-4
high = max((1 - m) / s for m, s in zip(MEAN, STD)) + 1e-4


def check(data, label, full):
    """A batch's shape, dtype, value range and labels; raises on anything else."""
    if data.shape[1:] != (3, size, size) or data.dtype != np.float32 or len(label) != len(data):
        raise SystemExit("%s: a batch of shape %s %s with %d labels, not (N, 3, %d, %d) float32"
                         % (side, data.shape, data.dtype, len(label), size, size))
    if full:
        if not (np.isfinite(data).all() and data.min() >= low and data.max() <= high
                and data.std() > 0.05):
            raise SystemExit("%s: values outside [%g, %g] or constant" % (side, low, high))
        if not (np.all(label == np.round(label)) and label.min() >= 0 and label.max() < 10):
            raise SystemExit("%s: labels outside the ten classes: %s" % (side, label[:8]))


checked = 0
for i, b in enumerate(loader(0)):
    check(*host(b), full=True)
    checked += 1
    if i == 1:
        break

load = loader(workers)
out = {"check": "%d batches passed" % checked, "images": len(dataset)}
for epoch in ("cold", "warm"):
    images, first = 0, None
    start, start_cpu = time.perf_counter(), tree_cpu()
    for b in load:
        data, label = b[0], b[1]
        if first is None:
            first = time.perf_counter() - start
        if tuple(data.shape[1:]) != (3, size, size):
            raise SystemExit("%s: a batch of shape %s" % (side, tuple(data.shape)))
        images += data.shape[0]
    wall, cpu = time.perf_counter() - start, tree_cpu() - start_cpu
    if images != len(dataset):
        raise SystemExit("%s: an epoch gave %d images of %d" % (side, images, len(dataset)))
    out[epoch] = {"wall": images / wall, "cpu": images / max(cpu, 1e-9), "first_batch_s": first,
                  "wall_s": wall, "cpu_s": cpu}
out["record"] = record()
print(json.dumps(out))
'''


def make_images(root, count, size, seed=0):
    """``count`` RGB PNGs of ``size`` x ``size`` in CLASSES folders under ``root``: smooth
    colour gradients (a class's hue) with noise, so that PNG compression has work to do."""
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, size, dtype=np.float32)
    for c in range(CLASSES):
        os.makedirs(os.path.join(root, "class%02d" % c), exist_ok=True)
    for i in range(count):
        c = i % CLASSES
        base = rng.uniform(0, 255, 3).astype(np.float32)
        slope = rng.uniform(-120, 120, (2, 3)).astype(np.float32)
        img = (base + ramp[:, None, None] * slope[0] + ramp[None, :, None] * slope[1]
               + rng.normal(0, 12, (size, size, 3)).astype(np.float32))
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
            os.path.join(root, "class%02d" % c, "%05d.png" % i))
    # Beside the folder, not in it: ImageFolderDataset warns about a file among its classes.
    with open(_marker(root), "w") as f:
        f.write("%d %d\n" % (count, size))


def _marker(root):
    return os.path.normpath(root) + ".made"


def images_at(root, count, size):
    """The image folder at ``root``, made when it does not hold ``count`` images of ``size``."""
    try:
        with open(_marker(root)) as f:
            if f.read().split() == [str(count), str(size)]:
                return root
    except OSError:
        pass
    if os.path.isdir(root) and os.listdir(root):
        # Never a folder this benchmark did not make (or made with other --images / --size).
        raise SystemExit("%s is not empty and holds no images of this benchmark of %d images of "
                         "%dx%d: give a new or empty folder to --dir" % (root, count, size, size))
    make_images(root, count, size)
    return root


def measure(side, root, workers, batch, size, threads):
    proc = subprocess.run([sys.executable, "-c", WORKER, side, root, str(workers), str(batch),
                           str(size), HERE, json.dumps(MEAN), json.dumps(STD)],
                          capture_output=True, text=True, cwd=ROOT,
                          env=_calibrate.peer_env(threads, extra={"PYTHONPATH": ROOT}
                                                  if side == "ours" else None))
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip() or "failed").splitlines()
        return None, lines[-1]
    return json.loads(proc.stdout.strip().splitlines()[-1]), None


PNG_CONFIG = """\
model:
  name: cnn
  args: {classes: %(classes)d, channels: [16, 32], image_size: %(size)d, in_channels: 3}
  init: xavier
data:
  train:
    type: image_folder
    path: %(root)s
    transforms:
      - {name: random_resized_crop, size: %(size)d}
      - random_flip_left_right
      - to_tensor
      - {name: normalize, mean: %(mean)s, std: %(std)s}
  batch_size: 64
  num_workers: 0
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, learning_rate: 0.001}
seed: 7
epochs: 2
"""


def runner_wait(config, workers, workdir, threads):
    """A ``trainer run`` of ``config`` with ``workers`` image workers: its epoch rows' data
    wait and step seconds, and its summary."""
    runs = os.path.join(workdir, "runs-%d" % workers)
    proc = subprocess.run([sys.executable, "-m", "trainer_cli.cli", "run", config, "--run-dir",
                           runs, "--json", "-o", "data.num_workers=%d" % workers],
                          capture_output=True, text=True, cwd=os.path.dirname(config),
                          env=_calibrate.peer_env(threads, extra={"PYTHONPATH": ROOT}))
    if proc.returncode != 0:
        raise SystemExit("trainer run %s failed: %s" % (config, proc.stderr.strip()[-800:]))
    summary = json.loads(proc.stdout)
    with open(os.path.join(summary["run_dir"], "metrics.jsonl")) as f:
        epochs = [row for row in map(json.loads, f) if row["kind"] == "epoch"]
    return {"epochs": [{"data_wait_s": r["data_wait_s"], "step_s": r["step_s"]} for r in epochs],
            "data_wait_s": summary["data_wait_s"], "step_s": summary["step_s"],
            "elapsed_s": summary["elapsed_s"], "steps": summary["steps"],
            "metrics": summary["metrics"]}


def run_runner(args, root, workdir):
    """``--runner``: the shipped image_folder config and the PNG folder's, 0 and N workers."""
    shapes = os.path.join(workdir, "shapes")
    os.makedirs(shapes)
    sys.path.insert(0, os.path.join(ROOT, "configs", "data"))
    import make_shapes
    make_shapes.main(os.path.join(shapes, "data", "shapes"))
    shutil.copy(os.path.join(ROOT, "configs", "image_folder.yaml"), shapes)
    pngs = os.path.join(workdir, "pngs.yaml")
    with open(pngs, "w") as f:
        f.write(PNG_CONFIG % {"classes": CLASSES, "size": args.size, "root": root,
                              "mean": list(MEAN), "std": list(STD)})
    cases = {"configs/image_folder.yaml": os.path.join(shapes, "image_folder.yaml"),
             "%d PNGs of %dx%d, batch 64" % (args.images, args.size, args.size): pngs}
    report = {"load_average": os.getloadavg()[0], "cases": {}}
    for name, config in cases.items():
        for workers in (0, args.workers):
            got = runner_wait(config, workers, os.path.dirname(config), args.threads)
            report["cases"]["%s, %d workers" % (name, workers)] = got
    return report


def print_runner(report):
    print("the runner's wait for data (trainer run, epoch rows' data_wait_s of step_s); "
          "load %.1f" % report["load_average"])
    for name, got in report["cases"].items():
        per_epoch = ", ".join("%.0f%%" % (100 * e["data_wait_s"] / e["step_s"])
                              for e in got["epochs"] if e["step_s"])
        print("  %-45s %5.2f s of %5.2f s in steps waiting for data (%.0f%%); by epoch: %s"
              % (name, got["data_wait_s"], got["step_s"],
                 100 * got["data_wait_s"] / max(got["step_s"], 1e-9), per_epoch))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3,
                    help="measurements of each side, in an order that alternates round to round")
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--size", type=int, default=32, help="image side in pixels")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads of every side")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="images per second of wall time, or per CPU-second of the process tree")
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument("--dir", default=None, help="where the images are kept (default: a temporary "
                    "folder, removed at the end)")
    ap.add_argument("--runner", action="store_true",
                    help="measure the runner's wait for data instead (see the docstring)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sides = [s for s in args.sides.split(",") if s]
    tmp = None
    if args.dir is None:
        tmp = tempfile.mkdtemp(prefix="bench_pipeline_")
        root = os.path.join(tmp, "images")
    else:
        root = args.dir
    try:
        images_at(root, args.images, args.size)
        if args.runner:
            with tempfile.TemporaryDirectory(prefix="bench_pipeline_runner_") as workdir:
                report = run_runner(args, root, workdir)
        else:
            report = run(args, sides, root)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=1))
    elif args.runner:
        print_runner(report)
    else:
        print_report(report, args)


def run(args, sides, root):
    load = os.getloadavg()[0]
    by_round, notes, records, checks = {}, [], {}, {}
    for r in range(args.rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            got, why = measure(side, root, args.workers, args.batch_size, args.size, args.threads)
            if got is None:
                notes.append("%s: %s" % (side, why))
                continue
            records.setdefault(side, got.pop("record"))
            checks[side] = got.pop("check")
            by_round.setdefault(side, {})[r] = got
    report = {"clock": args.clock, "rounds": args.rounds, "images": args.images,
              "size": args.size, "workers": args.workers, "batch_size": args.batch_size,
              "load_average": load, "rounds_by_side": by_round, "checks": checks,
              "notes": notes, "sides": list(records.values())}
    for epoch in ("cold", "warm"):
        for side, rounds in by_round.items():
            report.setdefault("%s_images_per_s" % epoch, {})[side] = statistics.median(
                v[epoch][args.clock] for v in rounds.values())
            report.setdefault("start_up_s", {})[side] = statistics.median(
                v["cold"]["first_batch_s"] - v["warm"]["first_batch_s"] for v in rounds.values())
        ours = by_round.get("ours", {})
        for side in sides[1:]:
            peer = by_round.get(side, {})
            ratios = [ours[r][epoch][args.clock] / peer[r][epoch][args.clock]
                      for r in ours if r in peer]
            if ratios:
                report.setdefault("%s_ratio" % epoch, {})[side] = statistics.median(ratios)
    return report


def print_report(report, args):
    print("image pipeline: %d PNGs of %dx%d RGB, RandomResizedCrop + flip + ToTensor + Normalize, "
          "batch %d, %d workers, %d thread(s); median of %d rounds, images per %s; load %.1f"
          % (report["images"], report["size"], report["size"], report["batch_size"],
             report["workers"], args.threads, report["rounds"],
             "second (wall)" if args.clock == "wall" else "CPU-second of the process tree",
             report["load_average"]))
    for epoch, what in (("cold", "a fresh loader's epoch, worker start-up included"),
                        ("warm", "an epoch with the workers running")):
        print("  %s (%s):" % (epoch, what))
        rates = report.get("%s_images_per_s" % epoch, {})
        for side, rate in rates.items():
            line = "    %-15s %8.0f images/s" % (side, rate)
            if side == "ours":
                line += "  (start-up %.3f s)" % report["start_up_s"]["ours"]
            else:
                ratio = report.get("%s_ratio" % epoch, {}).get(side)
                line += "  (start-up %.3f s)" % report["start_up_s"][side]
                if ratio:
                    line += "  ours %.2fx (target >= 1.0x: %s)" % (
                        ratio, "met" if ratio >= 1.0 else "NOT met")
            print(line)
    print("  start-up: the first batch's wait in the cold epoch less that in the warm one")
    for line in _calibrate.summary_lines(report.get("sides")):
        print("  " + line)
    print("  checked before timing (shape, float32, values within Normalize's range, labels): "
          + ", ".join("%s %s" % kv for kv in sorted(report["checks"].items())))
    for note in report["notes"]:
        print("  note: " + note)


if __name__ == "__main__":
    main()
