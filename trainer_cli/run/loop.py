"""The training loop: steps, epochs, validation, early stopping, and when to checkpoint.

One *step* is one optimizer update. It consumes ``grad_accumulation`` batches (fewer at the end
of an epoch: a short window is still one step, normalized by the samples it saw), each batch cut
first across workers (dist kvstores), then across this process's devices, with MXNet 1.9.1's
``split_data`` rule (``gluon.utils.split_bounds``: the first ``n % parts`` pieces one more). The
loop reads and writes only :class:`LoopState` and the parts; the
``recorder`` turns rows and checkpoints into files (and does nothing on ranks other than 0).

Rows: every ``log_every`` steps a ``train`` row with the running means of the epoch so far (over
the samples of applied steps; a skipped NaN step counts in ``skipped`` only), at each epoch's
end an ``epoch`` row with the whole epoch's means, and a ``val`` row per validation (every
``validate_every`` steps or epoch, and once more at the end when the last step was not
validated; the validation set goes through in passes of ``VAL_BATCHES`` training batches, or up
to four times that for samples of few features: :func:`validation_pass`).
Checkpoints: every ``checkpoint.every_steps`` steps, at epoch ends with ``every_epoch``, after a
step when ``checkpoint.every_seconds`` have passed since the last one (``checkpoint_due``: under
MPI the ranks' agreed answer), on a stop request, and always at the end.
"""
from __future__ import annotations

import contextlib
import functools
import math
import time

import numpy

from .. import autograd
from ..contrib import amp as _amp
from ..gluon.utils import split_bounds
from ..ndarray import array as _array
from ..ndarray.finite import KeptCheck
from ..ndarray.interop import raw as _raw
from ..gluon.trainer import LOCAL, REDUCE, STORE
from ..ndarray import zeros as _zeros
from . import grads
from .data import as_batch, is_mapped
from .finite import StepUndo, broken_part, update_was_finite
from .prefetch import Prefetcher, read_each
from .recurrent import CarriedState
from .state import Accumulator, BestTracker, EarlyStopping, LoopState

__all__ = ["TrainingLoop", "NonFiniteError", "evaluate_arrays", "validation_pass"]


class NonFiniteError(RuntimeError):
    """A step's loss, gradients or update were NaN/Inf under ``nan_policy: stop`` (the run
    fails), or a checkpoint would have held NaN/Inf."""


# Validation runs this many training batches' worth of samples per forward pass: it records no
# tape and keeps no activations for a backward pass, so a batch four times as large needs about
# the memory of a training step, which keeps every layer's activations and gradients (a net of
# one or two layers may need up to twice that), and pays a quarter of the per-batch Python costs
# (on configs/mlp_synthetic.yaml a validation took 8% of the run's time in batches of 32).
VAL_BATCHES = 4
# Samples of few features (tabular data: up to VAL_INPUT_BYTES / (VAL_BATCHES * batch size)
# bytes each) go through in passes of up to four times that, as long as a pass's input stays
# within VAL_INPUT_BYTES: there a pass costs mostly its Python, whatever its size (the 400
# samples of 20 features of configs/mlp_synthetic.yaml: 4 passes 0.37 ms, one pass 0.24 ms).
VAL_INPUT_BYTES = 256 << 10
# Under nan_policy skip the first this many skipped steps get a warning line each, then only the
# 100th, 1000th, ...: a run that skips most of its steps would otherwise bury its terminal and log
# under a line per step.
SKIPS_TOLD = 10


def _tells_skip(count) -> bool:
    if count <= SKIPS_TOLD:
        return True
    while count % 10 == 0:
        count //= 10
    return count == 1


def _reads_ahead(x) -> bool:
    """Whether batches of the features ``x`` are read ahead on a thread: memory-mapped rows,
    which come from the disk, and images, made from their files (``lazy_rows``)."""
    return is_mapped(x) or getattr(x, "lazy_rows", False)


class TrainingLoop:
    scaler = None  # precision float16: the Trainer's AMP loss scaler
    _prefetch = None  # mapped rows and images: a Prefetcher of the next batch's features
    _set_epoch = None  # image data: keys the random transforms by the epoch
    _carry = None      # text data: the CarriedState of the language model
    _undo = None      # nan_policy skip: the StepUndo each update's copy goes into
    _one_piece = False  # a batch is never split (see __init__)
    best_dir = None   # resumed with restore_best: the best checkpoint's folder
    best = None       # early_stopping / keep_best: the BestTracker choosing the best checkpoint
    _best_due = False        # a new best evaluation, not yet in a checkpoint
    _saves_best = True
    _restore_best = False
    _best_weights = None     # restore_best: host copies of the best weights, this session
    restored_best = None     # the step whose weights the run ended with (restore_best)
    # Seconds the training thread spent in steps and, within them, waiting for a batch's
    # features (read, decoded, transformed, or the read-ahead awaited): this session's, and
    # the running epoch's (the epoch row's data_wait_s and step_s).
    data_wait_s = step_s = 0.0
    _epoch_wait = _epoch_steps = 0.0

    def __init__(self, parts, state: LoopState, recorder, stop_requested=lambda: False,
                 clock=None, checkpoint_due=None):
        self.parts = parts
        # checkpoint.every_seconds: ``clock`` restarts at each checkpoint; ``checkpoint_due``
        # says when one is due (the clock itself, or the ranks' agreement on it).
        self.clock = clock
        self.checkpoint_due = checkpoint_due or (clock.due if clock is not None else _never)
        self.config = config = parts.config
        self.state = state
        self.recorder = recorder
        self.stop_requested = stop_requested
        self.params = list(parts.net.collect_params().values())
        self.dtype = numpy.dtype(config.model.dtype)
        self.train_acc = Accumulator(parts.metrics, parts.loss)
        self.train_acc.set_state(state.train)
        self.early = EarlyStopping(config.early_stopping) if config.early_stopping else None
        if self.early is not None:
            self.early.set_state(state.early_stopping)
        by = config.best_by()
        self.best = BestTracker(by.metric, by.mode or "min") if by is not None else None
        # A checkpoint of its own at a new best: every rank must decide alike, so under several
        # workers only a validation metric of identical weights (not dist_async) may ask for it;
        # otherwise the best is in a checkpoint only when a regular one falls on its step.
        kv = parts.kvstore
        self._saves_best = parts.num_workers == 1 or (
            by is not None and by.metric.startswith("val_")
            and not (kv is not None and "async" in kv.type))
        self._restore_best = bool(config.early_stopping and config.early_stopping.restore_best)
        self.total_steps = parts.order.total_updates(config.epochs, config.steps,
                                                     config.grad_accumulation)
        self.scaler = _amp.loss_scaler(parts.trainer)
        if self.scaler is not None and state.amp:
            self.scaler.set_state(state.amp)
        # Memory-mapped features and images: the next batch is read from the disk, or its
        # images made, on a thread while a step computes (whose kernels and GEMMs release the
        # GIL); with image workers the thread only waits for them.
        self._prefetch = Prefetcher(self._worker_features) if _reads_ahead(parts.train.x) \
            else None
        # Image data: random transforms are keyed by the epoch (see run/images.py).
        self._set_epoch = getattr(parts.train.x, "set_epoch", None)
        # Text for a language model: the recurrent state runs on from batch to batch.
        self._carry = CarriedState(parts.net) if parts.train.streams else None
        if self._carry is not None:
            self._carry.set_state(state.carried)
        self._finite_grads = grads.FiniteGrads()
        self._global_norm = grads.GlobalNorm()
        # Under nan_policy stop nothing needs undoing, so the gradients are looked at after the
        # update, in the call that checks what it wrote (one pass over a step's arrays, not two):
        # a NaN gradient still stops the run at its step, and no checkpoint is made after it.
        self._grads_after = (config.nan_policy == "stop" and config.grad_clip is None
                             and self.scaler is None and parts.num_workers == 1)
        # One worker, one device, no loss scaling: a batch is one piece on one device, which
        # _forward_backward runs without splitting it (the same arrays and calls, less Python).
        self._one_piece = (parts.num_workers == 1 and len(parts.contexts) == 1
                           and self.scaler is None)
        # Such a batch with nothing to reduce, clip, accumulate or undo takes _plain_step (decided
        # at the first step: reading the Trainer's mode decides it).
        self._plain = None
        self._saved_check = KeptCheck()   # the weights and states at each checkpoint
        self._saved_step = None
        self._broken = None
        self._must_stop = False
        self._started = time.monotonic()
        self._elapsed0 = state.elapsed_s

    # ------------------------------------------------------------------ the loop
    def run(self) -> str:
        """Train until a limit, early stopping or a stop request; returns the status:
        ``finished``, ``early_stopped`` or ``interrupted``."""
        st = self.state
        if st.finished:
            return "early_stopped" if st.stop_reason == "early_stopping" else "finished"
        order, k = self.parts.order, self.config.grad_accumulation
        # The training clock starts here: the run's setup after the loop was made (the log's
        # first lines, the thread limits, the progress display's start) is not training.
        self._started = time.monotonic()
        if self.clock is not None:
            self.clock.reset()
        try:
            return self._run(order, k)
        finally:
            if self._prefetch is not None:
                self._prefetch.close()
            for data in (self.parts.train, self.parts.val):
                if data is not None and getattr(data.x, "lazy_rows", False):
                    data.x.close()     # image worker processes

    def _run(self, order, k) -> str:
        st = self.state
        while st.stop_reason is None and not self._limit_reached():
            if self._plain and self._quiet_steps(order):
                return "interrupted"
            stepped = self._advance(order, k)
            if self._best_due and st.stop_reason is None:
                self._checkpoint()   # the best weights, at the step they were evaluated
            if stepped and st.stop_reason is None:
                if self.stop_requested():
                    self._checkpoint()
                    return "interrupted"
                if self.checkpoint_due():
                    self._checkpoint()
        self._finish()
        return "early_stopped" if st.stop_reason == "early_stopping" else "finished"

    def _advance(self, order, k) -> bool:
        """One step of ``k`` batches, or the end of an epoch that has none left; True for a step."""
        st = self.state
        batches = order.batches(st.epoch)
        if st.batch_in_epoch >= len(batches):  # rollover can leave an epoch without batches
            self._end_epoch()
            return False
        window = batches[st.batch_in_epoch:st.batch_in_epoch + k]
        if self._set_epoch is not None:
            self._set_epoch(st.epoch)
        if self._carry is not None and st.batch_in_epoch == 0:
            self._carry.reset()          # every epoch reads the streams from their start
        if self._prefetch is not None and st.batch_in_epoch + k < len(batches):
            self._prefetch.ahead(batches[st.batch_in_epoch + k])
        started = time.perf_counter()
        if self._plain is None:
            self._plain = (self._one_piece and self._grads_after and k == 1
                           and self.parts.trainer.mode == LOCAL)
        if self._plain:
            self._plain_step(window[0])
        else:
            self._step(window)
        took = time.perf_counter() - started
        self.step_s += took
        self._epoch_steps += took
        st.batch_in_epoch += len(window)
        self._after_step(epoch_end=st.batch_in_epoch >= len(batches))
        return True

    def _quiet_steps(self, order) -> bool:
        """The plain steps (``_plain``) before the next one after which something is due: a log
        row, a validation, a checkpoint, the epoch's end, the step limit. Each does what
        ``_advance``, ``_after_step`` and ``_run`` do for such a step, in the same order, without
        asking what is due (about 1% of a small model's step). True when a stop was requested
        (the checkpoint taken, as ``_run`` takes it)."""
        st, config = self.state, self.config
        if self._set_epoch is not None or self._prefetch is not None or st.batch_in_epoch == 0:
            return False    # (an epoch's first step: a language model's state starts afresh)
        batches = order.batches(st.epoch)
        quiet = len(batches) - st.batch_in_epoch - 1
        for every in (config.log_every, config.validate_every, config.checkpoint.every_steps):
            if isinstance(every, int):
                quiet = min(quiet, every - st.step % every - 1)
        if config.steps is not None:
            quiet = min(quiet, config.steps - st.step - 1)
        clock, plain_step, progress = time.perf_counter, self._plain_step, self.recorder.progress
        for _ in range(quiet):
            started = clock()
            plain_step(batches[st.batch_in_epoch])
            took = clock() - started
            self.step_s += took
            self._epoch_steps += took
            st.batch_in_epoch += 1
            progress(self, self._window_loss)
            if self.stop_requested():
                self._checkpoint()
                return True
            if self.checkpoint_due():
                self._checkpoint()
        return False

    def _limit_reached(self) -> bool:
        st, config = self.state, self.config
        if config.epochs is not None and st.epoch >= config.epochs:
            st.stop_reason = "epochs"
        elif config.steps is not None and st.step >= config.steps:
            st.stop_reason = "steps"
        return st.stop_reason is not None

    # ------------------------------------------------------------------ one step
    def _step(self, window):
        st = self.state
        window_acc_loss, window_count = 0.0, 0
        samples = sum(len(idx) for idx in window)
        metric_batches = []
        for idx in window:
            loss_sum, count, pairs = self._forward_backward(idx)
            window_acc_loss += loss_sum
            window_count += count
            metric_batches.append(pairs)
        finite = self._reduce_and_check(window_acc_loss)
        self._broken = "loss or gradient is"
        if finite:
            finite = self._update(samples)
        if finite:
            # Metrics count only applied steps, so a skipped NaN step does not poison the means.
            self.train_acc.add_loss(window_acc_loss, window_count)
            self.train_acc.add_outputs([pair for pairs in metric_batches for pair in pairs],
                                       window_acc_loss)
        elif finite is None:
            st.amp["skipped"] = st.amp.get("skipped", 0) + 1
        if self.config.grad_accumulation > 1 or not finite:
            grads.zero_grads(self.params)
        st.step += 1
        st.samples += samples
        self._window_loss = window_acc_loss / window_count if window_count else float("nan")
        if finite is False:
            self._non_finite()

    def _plain_step(self, idx):
        """``_step`` of one batch that is one piece, with nothing to reduce, clip, scale or undo
        (``_plain``): the same calls in the same order, less of the loop's own Python, which is
        a tenth of a small model's step."""
        st, trainer = self.state, self.parts.trainer
        loss_sum, count, pairs = self._forward_backward(idx)
        self._broken = "loss or gradient is"
        finite = math.isfinite(loss_sum)
        if finite:
            trainer.update(count)
            finite = update_was_finite(trainer, True) or self._update_checked(None, False)
        if finite:
            self.train_acc.add_loss(loss_sum, count)
            self.train_acc.add_outputs(pairs, loss_sum)
        else:
            grads.zero_grads(self.params)
        st.step += 1
        st.samples += count
        self._window_loss = loss_sum / count if count else float("nan")
        if not finite:
            self._non_finite()

    def _update(self, samples):
        """Apply the step's update; False when it made a trainable weight or an optimizer state
        NaN/Inf (finite gradients can still overflow), which ``nan_policy: skip`` undoes."""
        parts = self.parts
        on_store = parts.trainer.mode == STORE
        # Undoing an update needs a copy of what it changes; only skip needs to undo one.
        undo = None
        if self.config.nan_policy == "skip" and not on_store:
            if self._undo is None:
                self._undo = StepUndo(self.params, parts.trainer)
            else:
                self._undo.capture()
            undo = self._undo
        if on_store:
            parts.trainer.step(samples)
        else:
            if self.config.grad_clip is not None and math.isfinite(self._norm):
                # Under loss scaling the gradients are loss_scale times too large.
                scale = self.scaler.loss_scale if self.scaler is not None else 1.0
                grads.clip(self.params, self._norm, samples * scale, self.config.grad_clip)
            parts.trainer.update(samples)
        if self.scaler is not None and self.scaler.last_overflow:
            return None  # AMP skipped the update (nothing changed): a normal event, not nan_policy's
        return update_was_finite(parts.trainer, self._grads_after) or \
            self._update_checked(undo, on_store)

    def _update_checked(self, undo, on_store):
        """``_update``'s answer when the Trainer could not tell that its update was finite: the
        weights and states looked at whole (an update on the store, or one that found NaN/Inf)."""
        parts = self.parts
        if self._grads_after and not on_store and not self._finite_grads(self.params):
            return False   # "loss or gradient is": the run stops, the update is not undone
        broken = broken_part(self.params, parts.trainer, trainable_only=True)
        if broken is None:
            return True
        self._broken = "the update made the %s" % broken
        if undo is not None:
            undo.restore()
        elif self.config.nan_policy == "skip":
            self._broken += " (an update made on the kvstore cannot be undone)"
            self._must_stop = True
        return False

    def _forward_backward(self, idx):
        """Forward and backward of one batch on this worker's devices; returns the loss sum, the
        sample count and (label, output) pairs for the metrics."""
        if self._one_piece:
            return self._forward_backward_one(idx)
        parts = self.parts
        train, y = parts.train, parts.train.y
        lo, hi = _bounds(len(idx), parts.num_workers)[parts.rank]
        mine = idx[lo:hi]
        features = self._features(idx, mine)
        pieces = _bounds(len(mine), len(parts.contexts))
        heads, pairs = [], []
        with autograd.record():
            for device, (ctx, (a, b)) in enumerate(zip(parts.contexts, pieces)):
                if b > a:
                    label = labels = y[mine[a:b]]
                    x = features[a:b]
                else:
                    # A device with no sample still has to write a (zero) gradient, or the
                    # reduction would add its stale one: run one sample with a zero head gradient.
                    label, labels = None, y[idx[:1]]
                    x = train.features(idx[:1])
                if self._carry is not None and label is not None:
                    out = self._carry.forward(device, as_batch(x, ctx, self.dtype), ctx)
                else:
                    out = parts.net(as_batch(x, ctx, self.dtype))
                loss = parts.loss(out, _array(labels, ctx=ctx, dtype=self.dtype))
                scaled = loss
                if self.scaler is not None and label is not None:
                    with _amp.scale_loss(loss, parts.trainer) as scaled:
                        pass
                heads.append((loss, scaled, label is None))
                if label is not None:
                    pairs.append((label, out))
        loss_sum, count = 0.0, 0
        for loss, scaled, dummy in heads:
            if dummy:
                loss.backward(_zeros(loss.shape, ctx=loss.context, dtype=loss.dtype))
            else:
                scaled.backward()
                loss_sum += _loss_sum(loss)
                count += loss.shape[0]
        return loss_sum, count, pairs

    def _features(self, idx, mine):
        """The features of this worker's rows ``mine`` of batch ``idx`` (read ahead, or now),
        the wait counted in ``data_wait_s``."""
        started = time.perf_counter()
        features = (self._prefetch.get(idx) if self._prefetch is not None
                    else self.parts.train.features(mine))
        waited = time.perf_counter() - started
        self.data_wait_s += waited
        self._epoch_wait += waited
        return features

    def _forward_backward_one(self, idx):
        """``_forward_backward`` of a batch that is one piece (see ``_one_piece``)."""
        parts = self.parts
        train, ctx, dtype = parts.train, parts.contexts[0], self.dtype
        features = self._features(idx, idx)
        labels = train.y[idx]
        with autograd.record():
            x = as_batch(features, ctx, dtype)
            out = self._carry.forward(0, x, ctx) if self._carry is not None else parts.net(x)
            loss = parts.loss(out, _array(labels, ctx=ctx, dtype=dtype))
        loss.backward()
        return _loss_sum(loss), loss.shape[0], [(labels, out)]

    def _worker_features(self, idx):
        """The features of this worker's share of batch ``idx``."""
        parts = self.parts
        lo, hi = _bounds(len(idx), parts.num_workers)[parts.rank]
        return parts.train.features(idx[lo:hi])

    def _reduce_and_check(self, loss_sum) -> bool:
        parts = self.parts
        mode = parts.trainer.mode
        if mode == STORE:
            self._norm = self._grad_norm()
            # Under loss scaling the Trainer's scaler decides (and skips an overflow itself).
            return self.scaler is not None or (math.isfinite(self._norm) and math.isfinite(loss_sum))
        if mode == REDUCE:
            parts.trainer.allreduce_grads()
        if self._grads_after:
            self._norm = 0.0
            return math.isfinite(loss_sum)
        if mode == REDUCE:
            # Reduced gradients are equal on every device (and worker): look at one copy.
            self._norm = self._grad_norm(devices=[0])
        else:
            self._norm = self._grad_norm()
        if self.scaler is not None:
            return True  # the Trainer's loss scaler decides, and skips an overflow itself
        if not math.isfinite(self._norm):
            return False
        # Workers see different losses; only the reduced gradients are the same everywhere.
        return parts.num_workers > 1 or math.isfinite(loss_sum)

    def _grad_norm(self, devices=None) -> float:
        """The gradients' global norm where grad_clip needs it; otherwise only whether they are
        finite (0.0 or nan), which one call over all of them tells."""
        if self.config.grad_clip is not None:
            return self._global_norm(self.params, devices)
        return 0.0 if self._finite_grads(self.params, devices) else float("nan")

    def _non_finite(self):
        st = self.state
        what = "%s NaN/Inf at step %d (epoch %d)" % (self._broken, st.step, self._row_epoch())
        if self.config.nan_policy == "stop" or self._must_stop:
            raise NonFiniteError(
                "%s; stopping (nan_policy: stop). The last checkpoint before it is kept; consider "
                "a lower learning rate, grad_clip, or nan_policy: skip" % what)
        st.skipped += 1
        if _tells_skip(st.skipped):
            more = (" (from here on only the 100th, 1000th, ... skip is told; every row and the "
                    "summary count them)" if st.skipped == SKIPS_TOLD else "")
            self.recorder.message("warning: %s; update skipped (%d skipped so far)%s"
                                  % (what, st.skipped, more))

    # ------------------------------------------------------------------ after a step
    def _after_step(self, epoch_end: bool):
        st, config = self.state, self.config
        self.recorder.progress(self, self._window_loss)
        if st.step % config.log_every == 0:
            self._row("train", self.train_acc.values("train_"))
        if isinstance(config.validate_every, int) and st.step % config.validate_every == 0:
            self._validate()
        if epoch_end:
            self._end_epoch()
        if st.stop_reason is None:
            self._limit_reached()
        if st.stop_reason is None and config.checkpoint.every_steps \
                and st.step % config.checkpoint.every_steps == 0:
            self._checkpoint()

    def _end_epoch(self):
        st, config = self.state, self.config
        if self.train_acc.count:
            values = self.train_acc.values("train_")
            self._row("epoch", values, {"data_wait_s": round(self._epoch_wait, 4),
                                        "step_s": round(self._epoch_steps, 4)})
            self._evaluated(values)
        self._epoch_wait = self._epoch_steps = 0.0
        if config.validate_every == "epoch":
            self._validate()
        st.epoch += 1
        st.batch_in_epoch = 0
        self.train_acc.reset()
        if st.stop_reason is None and not self._limit_reached() and config.checkpoint.every_epoch:
            self._checkpoint()

    def _validate(self):
        parts, st = self.parts, self.state
        if parts.val is None:
            return
        values = evaluate_arrays(parts.net, parts.loss, parts.val_metrics, parts.val,
                                 self.config.data.batch_size, parts.contexts[0], self.dtype, "val_")
        st.last_val_step = st.step
        self._row("val", values)
        self._evaluated(values)

    def _evaluated(self, values):
        """An evaluation's values (a validation, or an epoch's training means): the best so far
        and early stopping see them."""
        st = self.state
        if self.best is not None and self.best.improves(st.best, values):
            st.best = self.best.record(st.step, values)
            self._best_due = self._saves_best
            if self._restore_best:
                self._best_weights = self.parts.net.parameter_arrays(copy=True)
        self._early_stopping_check(values)

    def _early_stopping_check(self, values):
        if self.early is not None and self.early.metric in values:
            if self.early.update(values[self.early.metric]):
                self.state.stop_reason = "early_stopping"
                self.recorder.message("early stopping: %s did not improve by more than %g for %d "
                                      "evaluations (best %s)" % (self.early.metric,
                                                                 self.early.min_delta,
                                                                 self.early.patience,
                                                                 _fmt(self.early.best)))

    def _finish(self):
        st = self.state
        if self.parts.val is not None and st.last_val_step != st.step and st.step > 0:
            self._validate()
        if self._restore_best and st.best and st.best["step"] != st.step:
            self._restore()
        st.finished = True
        self._checkpoint()

    def _restore(self):
        """restore_best: the network takes the best evaluation's weights, which the final
        checkpoint then holds (the optimizer's states stay those of the last step)."""
        st, net = self.state, self.parts.net
        best = st.best
        if self._best_weights is None:
            # Found before a resume: its checkpoint (never pruned while it is the best) has them.
            from . import layout
            from .layout import RunDirError

            path = self.best_dir
            try:
                if path is None:
                    raise RunDirError("no checkpoint of step %d" % best["step"])
                layout.verify_checkpoint(path)
                net.load_parameters(str(path / layout.PARAMS_FILE), ctx=self.parts.contexts)
            except (RunDirError, OSError, TypeError) as exc:
                self.recorder.message("warning: restore_best: cannot read the best weights (%s); "
                                      "the run ends with the last step's" % exc)
                return
        else:
            params = net._collect_params_with_prefix()
            for name, value in self._best_weights.items():
                params[name].set_data(_array(value, dtype=value.dtype))
        self.restored_best = best["step"]
        st.latest.update(best["values"])
        self.recorder.message("restore_best: the run ends with the weights of step %d, its best "
                              "(%s %s)" % (best["step"], best["metric"], _fmt(best["value"])))

    # ------------------------------------------------------------------ rows and checkpoints
    def _row_epoch(self) -> int:
        st = self.state
        return st.epoch + 1 if st.batch_in_epoch > 0 else max(st.epoch, 1)

    def _row(self, kind, values, timings=None):
        """A metrics row; ``timings`` (wall-clock figures, kept out of ``latest``) go beside the
        values."""
        st = self.state
        st.latest.update(values)
        row = {"kind": kind, "step": st.step, "epoch": self._row_epoch()}
        if kind == "train":
            row["lr"] = float(self.parts.trainer.learning_rate)
        row.update(values)
        row.update(timings or {})
        row["skipped"] = st.skipped
        row["time"] = round(time.time(), 3)
        self.recorder.row(row)

    def _checkpoint(self):
        st = self.state
        if self._saved_step == st.step and not st.finished:
            return
        st.train = self.train_acc.get_state()
        st.early_stopping = self.early.get_state() if self.early is not None else {}
        if self.scaler is not None:
            st.amp = dict(st.amp, **self.scaler.get_state())
        st.elapsed_s = self.elapsed()
        if self._carry is not None:
            st.carried = self._carry.get_state()
        # Never a checkpoint with NaN/Inf in it: it would become `latest` and prune good ones.
        # (Under MPI only what every rank holds alike, so that all ranks decide the same.)
        broken = broken_part(self.params, self.parts.trainer,
                             trainable_only=self.parts.num_workers > 1, whole_tables=True,
                             kept=self._saved_check)
        if broken is not None:
            raise NonFiniteError(
                "the %s are NaN/Inf at step %d: no checkpoint saved, the last one before it is "
                "kept" % (broken, st.step))
        self.recorder.checkpoint(self)
        self._saved_step = st.step
        self._best_due = False
        if self.clock is not None:
            self.clock.reset()

    def elapsed(self) -> float:
        return self._elapsed0 + (time.monotonic() - self._started)

    @property
    def learning_rate(self) -> float:
        return float(self.parts.trainer.learning_rate)


def _never() -> bool:
    return False


def validation_pass(batch_size: int, features) -> int:
    """The samples of one validation pass (see VAL_BATCHES, VAL_INPUT_BYTES)."""
    least = VAL_BATCHES * batch_size
    if not isinstance(features, numpy.ndarray):
        return least           # CSR rows: a dense layer's input is as wide as the vocabulary
    sample = features.dtype.itemsize * math.prod(features.shape[1:])
    fits = VAL_INPUT_BYTES // max(1, sample) // batch_size * batch_size
    return max(least, min(4 * least, fits))


def evaluate_arrays(net, loss_fn, metrics: dict, data, batch_size: int, ctx, dtype, prefix: str,
                    progress=None) -> dict:
    """The mean loss and the metrics of ``net`` over the data set ``data`` (an Arrays), in
    passes of :func:`validation_pass` samples: ``{prefix + "loss": ..., prefix + name: ...}``.
    ``progress(done, total)`` is called after each pass."""
    acc = Accumulator(metrics, loss_fn)
    # Text windows go through a batch (one window of every stream) at a time, the state carried.
    carry = CarriedState(net) if data.streams else None
    bs = data.streams if carry is not None else validation_pass(batch_size, data.x)
    passes = [slice(start, start + bs) for start in range(0, len(data), bs)]
    # Images and memory-mapped rows: the next pass is made or read while this one computes.
    with contextlib.closing(read_each(data.features, passes, _reads_ahead(data.x))) as reads:
        for rows, x in reads:
            y = data.y[rows]
            if carry is not None:
                out = carry.forward(0, as_batch(x, ctx, dtype), ctx)
            else:
                out = net(as_batch(x, ctx, dtype))
            loss = loss_fn(out, _array(y, ctx=ctx, dtype=dtype))
            loss_sum = _loss_sum(loss)
            acc.add_loss(loss_sum, loss.shape[0])
            acc.add_outputs([(y, out)], loss_sum)
            if progress is not None:
                progress(min(rows.stop, len(data)), len(data))
    return acc.values(prefix)


@functools.lru_cache(maxsize=256)
def _bounds(size, parts) -> tuple:
    """``split_bounds(size, parts)``, worked out once per size (a step asks twice)."""
    return tuple(split_bounds(size, parts))


def _loss_sum(loss) -> float:
    """The sum of per-sample losses in float64 (a host array is read in place, not copied)."""
    data = _raw(loss)
    if type(data) is not numpy.ndarray:
        data = loss.asnumpy()
    if data.size <= _FSUM_MAX:
        # A batch's losses as Python floats, summed exactly rounded: 3 us a step less than a
        # float64 copy and its sum in the loop of configs/mlp_synthetic.yaml.
        try:
            return math.fsum(data.ravel().tolist())
        except (ValueError, OverflowError):     # inf + -inf: NaN, as NumPy's sum gives
            return float("nan")
    return float(data.astype(numpy.float64).sum())


# Up to this many losses a step sums them with math.fsum (their list costs little), beyond it
# with NumPy (a per-pixel loss of a large batch would make millions of Python floats).
_FSUM_MAX = 1 << 12


def _fmt(value):
    return "none" if value is None else "%.6g" % value
