"""``bench_runner.py``'s PyTorch side: the model and config of ``configs/mlp_synthetic.yaml`` in a
process that loads nothing of ours (started with ``_calibrate.peer_env``), one JSON line out.

    python benchmarks/_lightning_peer.py MODE DATA.npz STEPS THREADS WORKDIR

MODE ``bare``: the bare PyTorch loop (a shuffled pass over the training arrays in batches,
``zero_grad`` / forward / cross-entropy / ``backward`` / ``Adam.step``, nothing else; 20 warm-up
steps, then STEPS timed). ``lightning``: PyTorch Lightning's ``Trainer.fit`` on a
``LightningModule`` of the same model, as its users configure what the runner does:
``ModelCheckpoint(every_n_train_steps=100, save_top_k=2)`` keeping the latest two (monitor
``step``, mode ``max``), ``CSVLogger`` every 25 steps, training loss and accuracy logged each
step, validation loss and accuracy each epoch, no progress bar, no model summary; steps/s over
the time from ``on_train_start`` to the end of ``fit`` (its start-up, like the runner's, not
counted). ``fsync``: what saving Lightning's checkpoint costs (``torch.save`` into a buffer
written to a file, as Lightning's ``_atomic_save`` does: no fsync) and what the same write with
an ``os.fsync`` costs, median ms.

DATA.npz holds the arrays the runner trains on (x_train, y_train, x_val, y_val), written by
``bench_runner.py`` from the runner's own data so both sides see the same samples.
"""
from __future__ import annotations

import io
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402
from _worker import _torch_arrays, check_loop  # noqa: E402

HIDDEN, CLASSES, BATCH, LR = (128, 64), 4, 32, 0.001


def make_net(torch, features):
    nn = torch.nn
    layers, width = [], features
    for units in HIDDEN:
        layers += [nn.Linear(width, units), nn.ReLU()]
        width = units
    layers.append(nn.Linear(width, CLASSES))
    net = nn.Sequential(*layers)
    for m in net:                       # the config's init: xavier, biases zero
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return net


def load(torch, path):
    import numpy as np
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: torch.from_numpy(np.ascontiguousarray(f[k])) for k in f.files}
    for key in ("y_train", "y_val"):
        arrays[key] = arrays[key].long()
    return arrays


def bare(torch, data, steps):
    x, y = data["x_train"], data["y_train"]
    net = make_net(torch, x.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    criterion = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(7)
    per_epoch = len(x) // BATCH

    def batches():
        while True:
            perm = torch.randperm(len(x), generator=gen)
            for b in range(per_epoch):
                idx = perm[b * BATCH:(b + 1) * BATCH]
                yield x[idx], y[idx]

    feed = batches()

    def step():
        xb, yb = next(feed)
        opt.zero_grad()
        criterion(net(xb), yb).backward()
        opt.step()

    # Checked before timing, as every benchmark's step is (_worker.check_step).
    check = check_loop("torch bare loop", step, lambda: _torch_arrays(net.parameters()))
    for _ in range(20):
        step()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return {"steps_per_s": steps / (time.perf_counter() - start),
            "cpu_steps_per_s": steps / max(time.process_time() - cpu, 1e-9), "check": check}


def lightning(torch, data, steps, workdir):
    import warnings

    try:
        _calibrate.import_torchvision()     # imported by Lightning when installed
    except ImportError:
        pass
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import Callback, ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    warnings.filterwarnings("ignore")      # num_workers=0 advice and the like: not measured
    F = torch.nn.functional

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = make_net(torch, data["x_train"].shape[1])

        def training_step(self, batch, _):
            xb, yb = batch
            logits = self.net(xb)
            loss = F.cross_entropy(logits, yb)
            self.log("train_loss", loss)
            self.log("train_acc", (logits.argmax(1) == yb).float().mean())
            return loss

        def validation_step(self, batch, _):
            xb, yb = batch
            logits = self.net(xb)
            self.log("val_loss", F.cross_entropy(logits, yb))
            self.log("val_acc", (logits.argmax(1) == yb).float().mean())

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=LR)

    class Clock(Callback):
        def on_train_start(self, trainer, module):
            self.start, self.cpu = time.perf_counter(), time.process_time()

    torch.manual_seed(7)
    train = DataLoader(TensorDataset(data["x_train"], data["y_train"]), batch_size=BATCH,
                       shuffle=True)
    val = DataLoader(TensorDataset(data["x_val"], data["y_val"]), batch_size=BATCH)
    clock = Clock()
    trainer = pl.Trainer(
        max_steps=steps, max_epochs=-1, accelerator="cpu", devices=1,
        callbacks=[ModelCheckpoint(dirpath=os.path.join(workdir, "checkpoints"),
                                   every_n_train_steps=100, save_top_k=2, monitor="step",
                                   mode="max"), clock],
        logger=CSVLogger(workdir), log_every_n_steps=25, check_val_every_n_epoch=1,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=workdir)
    trainer.fit(Module(), train, val)
    elapsed, cpu = time.perf_counter() - clock.start, time.process_time() - clock.cpu
    kept = sorted(os.listdir(os.path.join(workdir, "checkpoints")))
    return {"steps_per_s": trainer.global_step / elapsed, "steps": trainer.global_step,
            "cpu_steps_per_s": trainer.global_step / max(cpu, 1e-9),
            "checkpoints_kept": kept, "lightning": pl.__version__}


def fsync_cost(torch, data, workdir, repeats=15):
    net = make_net(torch, data["x_train"].shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    torch.nn.functional.cross_entropy(net(data["x_train"][:BATCH]), data["y_train"][:BATCH]).backward()
    opt.step()
    ckpt = {"state_dict": net.state_dict(), "optimizer_states": [opt.state_dict()],
            "global_step": 1, "epoch": 0}
    path = os.path.join(workdir, "fsync-probe.ckpt")
    out = {}
    for name, durable in (("torch_save_ms", False), ("torch_save_fsync_ms", True)):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            buf = io.BytesIO()
            torch.save(ckpt, buf)
            with open(path, "wb") as f:
                f.write(buf.getvalue())
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            times.append((time.perf_counter() - start) * 1e3)
        out[name] = statistics.median(times)
    out["bytes"] = os.path.getsize(path)
    return out


def main(argv):
    mode, data_path, steps, threads, workdir = argv[0], argv[1], int(argv[2]), int(argv[3]), argv[4]
    import torch
    torch.set_num_threads(threads)
    data = load(torch, data_path)
    if mode == "bare":
        out = bare(torch, data, steps)
    elif mode == "lightning":
        out = lightning(torch, data, steps, workdir)
    elif mode == "fsync":
        out = fsync_cost(torch, data, workdir)
    else:
        raise SystemExit("unknown mode %r" % mode)
    record = _calibrate.describe("torch " + mode, torch=torch)
    if mode == "lightning":
        record["extra"] = {"pytorch_lightning": out["lightning"]}
    out["side"] = record
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
