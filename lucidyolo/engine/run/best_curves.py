"""Curves and confusion matrices of the epoch ``best.ckpt`` holds, written at the end of ``lucid fit``.

After each validation the callback asks whether this epoch becomes
``best.ckpt`` by the checkpoint callback's own rule (the first validated epoch,
then a strictly higher monitored value; the checkpoint callback, which Lightning
runs after every other callback, still holds the previous best) and, if so,
keeps the task's ``matches(metric)``: the metric's own matching of that epoch,
a few arrays of the size of the validation detections. At the end of fit rank
0 draws them (:mod:`lucidyolo.engine.run.curve_plots`: ``box_pr_curve.png`` ...
in the run folder, one set per IoU type ``K``, named by
:func:`~lucidyolo.engine.run.curve_plots.plot_prefix` as ``lucid eval --plots`` names
them) and logs the figures and the numbers to TensorBoard under ``best/{K}/``.

A task without the hook (or one returning ``{}``) gets no curves; nothing else changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback


class BestCurves(Callback):
    """Keeps the best epoch's matches and draws them at the end of fit.

    Args:
        matches: the task's ``matches(metric)`` hook.
        monitor: the logged key ``best.ckpt`` monitors (higher is better).
        checkpoint: the ``best.ckpt`` callback (its ``best_model_score`` is the previous best).
        run_dir: where the files go.
        plot_names: the task's file-name prefix of each IoU type (``MetricSpec.plot_names``).
    """

    def __init__(
        self,
        matches: Callable[..., Mapping[str, Any]],
        monitor: str,
        checkpoint: Any,
        run_dir: Path,
        plot_names: Mapping[str, str] | None = None,
    ) -> None:
        self.plot_names = dict(plot_names or {})
        self.matches = matches
        self.monitor = monitor
        self.checkpoint = checkpoint
        self.run_dir = Path(run_dir)
        self.kept: dict[str, Any] = {}
        self.kept_epoch: int | None = None
        self.written: list[Path] = []

    def _becomes_best(self, trainer: pl.Trainer) -> bool:
        current = trainer.callback_metrics.get(self.monitor)
        if current is None:
            return False
        previous = self.checkpoint.best_model_score if self.checkpoint is not None else None
        if previous is None:
            return True
        value, before = float(current), float(previous)
        return not math.isnan(value) and (math.isnan(before) or value > before)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or not self._becomes_best(trainer):
            return
        found = dict(self.matches(metric=pl_module.val_metric) or {})
        names = tuple(getattr(pl_module, "class_names", ()) or ())
        # the metric knows class indices only: name them as the run does
        self.kept = {
            k: replace(m, names=names) if len(names) == m.num_classes else m
            for k, m in found.items()
        }
        self.kept_epoch = trainer.current_epoch

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero or not self.kept:
            return
        import numpy as np
        from PIL import Image

        from lucidyolo.engine.run.curve_plots import plot_prefix, write_curve_plots
        from lucidyolo.metrics.curves import compute_curves

        writer = _tensorboard(trainer)
        step = int(self.kept_epoch or 0)
        for key, found in self.kept.items():
            curves = compute_curves(found)
            prefix = plot_prefix(key, self.plot_names)
            written = write_curve_plots(curves, self.run_dir, prefix)
            self.written += written
            if writer is not None:
                # the PNGs just written, not the figures again: TensorBoard's add_figure goes through pyplot
                for path in (p for p in written if p.suffix == ".png"):
                    with Image.open(path) as im:
                        pixels = np.asarray(im.convert("RGB"))
                    name = path.stem.removeprefix(f"{prefix}_")
                    writer.add_image(
                        f"best/{key}/{name}", pixels, global_step=step, dataformats="HWC"
                    )
                summary = curves.summary()
                for name in ("best_conf", "precision", "recall", "f1", "map"):
                    if summary[name] is not None and math.isfinite(summary[name]):
                        writer.add_scalar(f"best/{key}/{name}", summary[name], global_step=step)
        if writer is not None:
            writer.flush()


def _tensorboard(trainer: pl.Trainer) -> Any:
    """The run's TensorBoard ``SummaryWriter``, or ``None``."""
    from pytorch_lightning.loggers import TensorBoardLogger

    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):
            return logger.experiment
    return None
