"""One line per epoch for runs without a progress bar (logs, CI, ``nohup``, a pipe).

A run whose output is not a terminal would otherwise be silent from its first
line to its last. Each line carries what a reader of a log needs to judge the
run without opening ``results.csv``: the epoch, the training loss terms, the lr,
the training throughput (images per second of the training loop, validation
excluded), the validation metrics of that epoch and its duration, and the
elapsed and remaining wall time. One more line says when the first training
step is done: the start-up a short run waits for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour)."""
    s = max(int(round(seconds)), 0)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class EpochLines(Callback):
    """Calls ``log(line)`` at the end of every training epoch (global rank 0 only).

    Args:
        log: where the line goes (the CLI's printer; the engine itself prints nothing).
        loss_terms: the task's loss terms, logged as ``train/{term}_loss``.
        metric_keys: the task's epoch metrics (``val/...``), shown when validation ran.
        batch_size: images per training batch on one device (the throughput counts
            ``batches x batch_size x world size``; a short last batch counts full).
    """

    def __init__(self, log: Callable[[str], None], loss_terms: Sequence[str], metric_keys: Sequence[str],
                 batch_size: int) -> None:
        self.emit = log
        self.loss_terms = tuple(loss_terms)
        self.metric_keys = tuple(metric_keys)
        self.batch_size = int(batch_size)
        self._fit_start = self._epoch_start = 0.0
        self._train_s: float | None = None
        self._batches = 0
        self._validated = -1
        self._val_start = 0.0
        self._val_s: float | None = None
        self._stepped = False

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._fit_start = time.perf_counter()
        self._first_epoch = trainer.current_epoch  # a resumed run starts later: its rate is its own

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_start = time.perf_counter()
        self._train_s = None
        self._batches = 0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self._batches += 1
        if not self._stepped and trainer.is_global_zero:
            # start-up (workers, first batch, first graph) is what a short run waits for: say when it ends
            self._stepped = True
            self.emit(f"first training step done {time.perf_counter() - self._fit_start:.1f} s after the fit started")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._val_start = time.perf_counter()
            if self._train_s is None:
                self._train_s = self._val_start - self._epoch_start  # Lightning validates inside the epoch

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated = trainer.current_epoch
            self._val_s = time.perf_counter() - self._val_start

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        now = time.perf_counter()
        train_s = self._train_s if self._train_s is not None else now - self._epoch_start
        m = {k: float(v) for k, v in trainer.callback_metrics.items() if getattr(v, "numel", lambda: 0)() == 1}
        epoch, total = trainer.current_epoch, int(trainer.max_epochs or 0)
        parts = [f"epoch {epoch + 1}/{total}"]
        losses = [f"{t} {m[f'train/{t}_loss']:.4g}" for t in self.loss_terms
                  if math.isfinite(m.get(f"train/{t}_loss", math.nan))]
        if losses:
            parts.append("loss " + " ".join(losses))
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.3g}")
        images = self._batches * self.batch_size * max(int(trainer.world_size or 1), 1)
        if train_s > 0 and images:
            parts.append(f"{images / train_s:.1f} img/s")
        if self._validated == epoch:
            parts += [f"{k} {m[k]:.4f}" for k in self.metric_keys if k in m]
            parts.append(f"val {self._val_s:.1f} s")
        elapsed = now - self._fit_start
        done = epoch + 1 - self._first_epoch
        left = elapsed / max(done, 1) * max(total - epoch - 1, 0)
        parts.append(f"{clock(elapsed)} elapsed, ~{clock(left)} left")
        self.emit(" | ".join(parts))
