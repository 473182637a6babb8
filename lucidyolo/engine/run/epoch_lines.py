"""One line per epoch for runs without a progress bar (logs, CI, ``nohup``, a pipe).

A run whose output is not a terminal would otherwise be silent from its first
line to its last. Each line carries what a reader of a log needs to judge the
run without opening ``results.csv``: the epoch, the training loss terms, the lr,
the training throughput (images per second of the training loop, validation
excluded), the validation metrics of that epoch and its duration, and the
elapsed and remaining wall time. One more line says when the first training
step is done: the start-up a short run waits for. Within an epoch, a progress
line every :data:`PROGRESS_EVERY_S` seconds (batches done of the total, images
per second, the epoch's remaining time; the same for a long validation), so the
log of a COCO-size epoch never looks hung.

The first lines say how busy the machine is (a shared CPU trains several times
slower than an idle one) and what the run is (epochs, batches, image size); the
first epoch's line estimates the whole run's time, and a long first epoch gets
an estimate :data:`EARLY_ESTIMATE_S` seconds after its first step.

On a terminal (:class:`EpochBar`) the same lines stay, one per epoch, printed
above a live bar of the current epoch (batches, img/s, the epoch's time left)
instead of the progress lines; a narrow terminal gets a compact form of the line
(:func:`epoch_fields`), broken only between its fields (:func:`fit_width`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback, ProgressBar

PROGRESS_EVERY_S = 30.0
"""Seconds between two progress lines within an epoch (the issue asks for at least one a minute).

``LUCIDYOLO_PROGRESS_EVERY_S`` overrides it (a test's short fit sets it to 0: a line after every batch)."""

PROGRESS_ENV = "LUCIDYOLO_PROGRESS_EVERY_S"

EARLY_ESTIMATE_S = 20.0
"""Seconds of training after the first step before a still-unfinished first epoch estimates the run's time."""



def progress_every_s() -> float:
    """:data:`PROGRESS_EVERY_S`, or the environment's override when it is a number >= 0."""
    try:
        value = float(os.environ.get(PROGRESS_ENV, ""))
    except ValueError:
        return PROGRESS_EVERY_S
    return value if value >= 0 else PROGRESS_EVERY_S


def progress_line(what: str, done: int, total: float, images: int, seconds: float, scope: str = "epoch") -> str:
    """``"progress: {what}, batch 12/7330 | 41.3 img/s | ~1:02:03 left in the {scope}"`` (``total`` may be inf:
    no count and no estimate)."""
    parts = [f"progress: {what}, batch {done}/{int(total) if math.isfinite(total) else '?'}"]
    if seconds > 0 and images:
        parts.append(f"{images / seconds:.1f} img/s")
    if math.isfinite(total) and done and seconds > 0:
        parts.append(f"~{clock(seconds / done * max(total - done, 0))} left in the {scope}")
    return " | ".join(parts)


def clock(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour)."""
    s = max(int(round(seconds)), 0)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def three_digits(value: float) -> str:
    """``value`` to 3 significant digits, trailing zeros kept (``8.00``, ``0.627``, ``12.4``; ``1.2e+03`` past 999)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:.3g}"
    rounded = float(f"{value:.3g}")  # 9.999 -> 10.0: the digits count from the rounded value
    if abs(rounded) >= 1000 or abs(rounded) < 0.001:
        return f"{value:.2e}"
    return f"{value:.{max(2 - math.floor(math.log10(abs(rounded))), 0)}f}"


def duration(seconds: float) -> str:
    """``"7.2 s"`` under 10 s, ``"42 s"`` under a minute, else :func:`clock`."""
    if seconds < 9.95:
        return f"{max(seconds, 0.0):.1f} s"
    return f"{seconds:.0f} s" if seconds < 59.5 else clock(seconds)


def machine_line(cores: int, busy: float | None, load: float | None) -> str:
    """The start line saying how busy the machine is.

    Args:
        cores: the CPUs this process may use.
        busy: cores kept busy by other processes (:func:`lucidyolo.engine.process.cpu_threads.busy_cores`), None if unknown.
        load: the 1-minute load average, None where the OS has none.
    """
    avg = "" if load is None else f"load average {load:.1f}"
    if busy is None:
        return f"machine: {cores} cores" + (f", {avg}" if avg else "")
    if busy < 0.5:
        return f"machine: {cores} cores, idle at the start" + (f" ({avg})" if avg else "")
    share = f"machine: {busy:.1f} of {cores} cores busy with other work" + (f" ({avg})" if avg else "")
    return share + ": this run gets the rest and is slower than on an idle machine"


def run_line(first_epoch: int, epochs: int, batches: float, batch_size: int, img_size: int | None) -> str:
    """``"run: 20 epochs x 3 batches of 8 images at 320 px (estimate after epoch 1)"``: what the run is, and that
    its first epoch's line estimates its time."""
    span = f"{epochs} epochs" if first_epoch == 0 else f"epochs {first_epoch + 1}-{epochs} of {epochs}"
    count = f"{int(batches)} batches" if math.isfinite(batches) else "batches"
    size = f" at {img_size} px" if img_size else ""
    return f"run: {span} x {count} of {batch_size} images{size} (estimate after epoch {first_epoch + 1})"


def early_estimate_line(run_s: float, epochs_left: int, images_per_s: float) -> str:
    """The estimate a long first epoch gives before it ends (training pace so far, validation not yet seen)."""
    return (f"estimate: ~{clock(run_s)} for the run's {epochs_left} epoch{'s' if epochs_left != 1 else ''} at the "
            f"training pace so far ({images_per_s:.1f} img/s; validation not counted yet)")


def epoch_fields(
    epoch: int, total: int, losses: Sequence[tuple[str, float]], *, lr: float | None = None,
    images_per_s: float | None = None, metrics: Sequence[tuple[str, float]] = (), val_s: float | None = None,
    epoch_s: float = 0.0, elapsed: float = 0.0, left: float = 0.0, run_total: float | None = None,
    compact: bool = False, main_metric: str | None = None,
) -> list[str]:
    """The fields of one epoch's line (joined with ``" | "``).

    The full form (logs, pipes, wide terminals) has every loss to 4 digits, the lr, the throughput, every
    metric, the validation's time and the elapsed and remaining time. The compact form (a terminal narrower
    than the full line) keeps what judges the run: the loss terms to 3 digits (without the word ``loss``), the main metric
    without its ``val/`` prefix, the epoch's time and the run's time left. ``run_total`` (the first epoch of a
    run) adds the estimated total.
    """
    parts = [f"epoch {epoch}/{total}"]
    if losses:  # the compact line names the terms only (box 0.727): 80 columns hold a det line of 99 epochs
        parts.append(("" if compact else "loss ") + " ".join(f"{t} {three_digits(v) if compact else f'{v:.4g}'}"
                                                             for t, v in losses))
    if compact:
        shown = [(k, v) for k, v in metrics if main_metric is None or k == main_metric][-1:]
        parts += [f"{k.removeprefix('val/')} {v:.3f}" for k, v in shown]
        parts.append(f"{duration(epoch_s)}, ~{clock(left)} left")
        if run_total is not None:
            parts.append(f"est. total ~{clock(run_total)}")
        return parts
    if lr is not None:
        parts.append(f"lr {lr:.3g}")
    if images_per_s is not None:
        parts.append(f"{images_per_s:.1f} img/s")
    parts += [f"{k} {v:.4f}" for k, v in metrics]
    if val_s is not None:
        parts.append(f"val {val_s:.1f} s")
    if run_total is not None:
        parts.append(f"est. total ~{clock(run_total)}")
    parts.append(f"{clock(elapsed)} elapsed, ~{clock(left)} left")
    return parts


def fit_width(parts: Sequence[str], width: int | None, sep: str = " | ", indent: str = "  ") -> str:
    """``parts`` joined with ``sep`` on as few lines as fit in ``width`` columns, broken only between parts
    (continuation lines start with ``indent``); ``None``: one line. A part longer than the width keeps a
    line of its own."""
    if width is None:
        return sep.join(parts)
    lines: list[str] = []
    line = ""
    for part in parts:
        if not line:
            line = (indent if lines else "") + part
        elif len(line) + len(sep) + len(part) <= width:
            line += sep + part
        else:
            lines.append(line)
            line = indent + part
    lines.append(line)
    return "\n".join(lines)


class EpochLines(Callback):
    """Calls ``log(line)`` at the start of the fit and at the end of every training epoch (global rank 0 only).

    Args:
        log: where the line goes (the CLI's printer; the engine itself prints nothing).
        loss_terms: the task's loss terms, logged as ``train/{term}_loss``.
        metric_keys: the task's epoch metrics (``val/...``), shown when validation ran.
        batch_size: images per training batch on one device (the throughput counts
            ``batches x batch_size x world size``; a short last batch counts full).
        img_size: the training image size, named in the start line.
        main_metric: the metric the compact line keeps (default: the last of ``metric_keys``).
    """

    def __init__(self, log: Callable[[str], None], loss_terms: Sequence[str], metric_keys: Sequence[str],
                 batch_size: int, *, img_size: int | None = None, main_metric: str | None = None) -> None:
        self.emit = log
        self.loss_terms = tuple(loss_terms)
        self.metric_keys = tuple(metric_keys)
        self.batch_size = int(batch_size)
        self.img_size = img_size
        self.main_metric = main_metric
        self._fit_start = self._epoch_start = 0.0
        self._train_s: float | None = None
        self._batches = 0
        self._validated = -1
        self._val_start = 0.0
        self._val_s: float | None = None
        self._stepped = False
        self._first_step = 0.0
        self._estimated = False
        self.every = progress_every_s()
        self._said = 0.0
        self._val_batches = 0
        self._first_epoch = 0
        self.says = True  # False: the lines go nowhere (the start line's measurement is skipped)

    def width(self) -> int | None:
        """Columns the epoch line must fit (None: one line, whatever its length)."""
        return None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero and self.says:
            from lucidyolo.engine.process.cpu_threads import busy_cores, usable_cores

            try:
                load: float | None = os.getloadavg()[0]
            except (AttributeError, OSError):  # Windows
                load = None
            self.emit(machine_line(usable_cores(), busy_cores(), load))
        self._fit_start = time.perf_counter()
        self._first_epoch = trainer.current_epoch  # a resumed run starts later: its rate is its own

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:
            self.emit(run_line(trainer.current_epoch, int(trainer.max_epochs or 0),
                               float(trainer.num_training_batches), self.batch_size * max(int(trainer.world_size or 1), 1),
                               self.img_size))

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_start = time.perf_counter()
        self._train_s = None
        self._batches = 0
        self._said = self._epoch_start

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self._batches += 1
        if not trainer.is_global_zero:
            return
        now = time.perf_counter()
        total = float(trainer.num_training_batches)
        images = self._batches * self.batch_size * max(int(trainer.world_size or 1), 1)
        if not self._stepped:
            # start-up (workers, first batch, first graph) is what a short run waits for: say when it ends
            self._stepped = True
            self._said = self._first_step = now
            self.emit(f"first training step done {now - self._fit_start:.1f} s after the fit started")
        elif (not self._estimated and trainer.current_epoch == self._first_epoch and math.isfinite(total)
              and self._batches < total and now - self._first_step >= EARLY_ESTIMATE_S):
            # a long first epoch: the run's time from the steps after the first (start-up left out)
            self._estimated = True
            step_s = (now - self._first_step) / (self._batches - 1)
            epochs_left = int(trainer.max_epochs or 0) - self._first_epoch
            run_s = now - self._fit_start + step_s * (total - self._batches) + step_s * total * (epochs_left - 1)
            self.emit(early_estimate_line(run_s, epochs_left, images / (now - self._epoch_start)))
        elif now - self._said >= self.every:
            self._said = now
            self.emit(progress_line(f"epoch {trainer.current_epoch + 1}/{int(trainer.max_epochs or 0)}",
                                    self._batches, total, images, now - self._epoch_start))

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._val_start = self._said = time.perf_counter()
            self._val_batches = 0
            if self._train_s is None:
                self._train_s = self._val_start - self._epoch_start  # Lightning validates inside the epoch

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self._val_batches += 1
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        now = time.perf_counter()
        if now - self._said >= self.every:
            self._said = now
            total = trainer.num_val_batches[0] if trainer.num_val_batches else math.inf
            images = self._val_batches * self.batch_size  # this rank's share of the split
            self.emit(progress_line(f"validation of epoch {trainer.current_epoch + 1}", self._val_batches,
                                    float(total), images, now - self._val_start, scope="validation"))

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
        losses = [(t, m[f"train/{t}_loss"]) for t in self.loss_terms
                  if math.isfinite(m.get(f"train/{t}_loss", math.nan))]
        images = self._batches * self.batch_size * max(int(trainer.world_size or 1), 1)
        validated = self._validated == epoch
        elapsed = now - self._fit_start
        done = epoch + 1 - self._first_epoch
        left = elapsed / max(done, 1) * max(total - epoch - 1, 0)
        width = self.width()

        def fields(compact: bool) -> list[str]:
            return epoch_fields(
                epoch + 1, total, losses,
                lr=trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else None,
                images_per_s=images / train_s if train_s > 0 and images else None,
                metrics=[(k, m[k]) for k in self.metric_keys if k in m] if validated else [],
                val_s=self._val_s if validated else None, epoch_s=now - self._epoch_start, elapsed=elapsed,
                left=left, run_total=elapsed + left if done == 1 and left > 0 else None, compact=compact,
                main_metric=self.main_metric if self.main_metric is not None else (self.metric_keys or (None,))[-1],
            )

        parts = fields(False)
        if width is not None and len(" | ".join(parts)) > width:  # a terminal too narrow for the full line
            parts = fields(True)
        self.emit(fit_width(parts, width))


class EpochBar(EpochLines, ProgressBar):
    """The terminal's view of a fit: :class:`EpochLines`' lines, kept one per epoch, above one live bar of
    the current epoch (``epoch 3/20 ━━━━ 12/40 28.5 img/s ~0:12 left``; ``val 3/20`` while it validates).

    The bar is a transient rich ``Progress`` on stdout: before a line is logged it is stopped (cleared), and
    the next batch draws it again, so the lines scroll up like a log and a narrow terminal shows no
    squeezed metric table. ``log`` None: the bar alone. Where stdout is no terminal, the lines alone (with
    the progress lines of :class:`EpochLines`).
    """

    REFRESH_S = 0.2

    def __init__(self, log: Callable[[str], None] | None, loss_terms: Sequence[str], metric_keys: Sequence[str],
                 batch_size: int, *, img_size: int | None = None, main_metric: str | None = None) -> None:
        self._log = log
        EpochLines.__init__(self, self._above, loss_terms, metric_keys, batch_size, img_size=img_size,
                            main_metric=main_metric)
        ProgressBar.__init__(self)
        self.says = log is not None
        self._enabled = True
        self._console: Any = None
        self._progress: Any = None
        self._task: Any = None
        self._drawn = 0.0
        self._phase: tuple[str, float] | None = None

    def _terminal(self) -> bool:
        if self._console is None:
            from rich.console import Console

            self._console = Console(highlight=False)
            if self._console.is_terminal or self._console.is_jupyter:
                self.every = math.inf  # the bar shows the progress
        return bool(self._console.is_terminal or self._console.is_jupyter)

    def width(self) -> int | None:
        return int(self._console.width) if self._terminal() and not self._console.is_jupyter else None

    def disable(self) -> None:
        self._enabled = False
        self._stop()

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``LightningModule.print``: above the bar, like the lines."""
        self._stop()
        print(*args, **kwargs)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero:
            self._terminal()  # decides between the bar and the progress lines
        super().on_fit_start(trainer, pl_module)

    def _above(self, line: str) -> None:
        self._stop()
        if self._log is not None:
            self._log(line)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _draw(self, done: int, total: float, images: int, seconds: float, force: bool = False) -> None:
        if not self._enabled or self._phase is None or not self._terminal():
            return
        now = time.perf_counter()
        if not force and now - self._drawn < self.REFRESH_S and self._progress is not None:
            return
        self._drawn = now
        rate = f"{images / seconds:.1f} img/s" if seconds > 0 and images else ""
        left = f"~{clock(seconds / done * max(total - done, 0))} left" if math.isfinite(total) and done else ""
        finite = total if math.isfinite(total) else None
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"), TextColumn("{task.fields[left]}"),
                console=self._console, transient=True, auto_refresh=False,
            )
            self._task = self._progress.add_task(self._phase[0], total=finite, completed=done, rate=rate, left=left)
            self._progress.start()
        self._progress.update(self._task, description=self._phase[0], completed=done, total=finite, rate=rate,
                              left=left)
        self._progress.refresh()

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_epoch_start(trainer, pl_module)
        if trainer.is_global_zero:
            self._phase = (f"epoch {trainer.current_epoch + 1}/{int(trainer.max_epochs or 0)}",
                           float(trainer.num_training_batches))

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        super().on_train_batch_end(trainer, pl_module, *args)
        if trainer.is_global_zero and self._phase is not None:
            images = self._batches * self.batch_size * max(int(trainer.world_size or 1), 1)
            self._draw(self._batches, self._phase[1], images, time.perf_counter() - self._epoch_start,
                       force=self._batches >= self._phase[1])

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_validation_start(trainer, pl_module)
        if trainer.is_global_zero and not trainer.sanity_checking:
            total = trainer.num_val_batches[0] if trainer.num_val_batches else math.inf
            self._phase = (f"val {trainer.current_epoch + 1}/{int(trainer.max_epochs or 0)}", float(total))
            self._draw(0, float(total), 0, 0.0, force=True)

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        super().on_validation_batch_end(trainer, pl_module, *args)
        if trainer.is_global_zero and not trainer.sanity_checking and self._phase is not None:
            self._draw(self._val_batches, self._phase[1], self._val_batches * self.batch_size,
                       time.perf_counter() - self._val_start)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._phase = None
        self._stop()
        super().on_train_epoch_end(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._phase = None
        self._stop()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._phase = None
        self._stop()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._phase = None
        self._stop()
