"""A training epoch whose batches held no instance at all is named, not trained through in silence.

A survival rule that drops every instance after the crop, labels that all fail a
field's reader, or a split of background images alone: the loss has nothing to
match, the metric stays at zero and nothing else says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback


class EmptyEpochWarning(Callback):
    """Counts the instances of every training batch (their number, a shape: no device sync) and warns at the
    end of an epoch that saw none. Only for tasks whose targets are instances (an image-level label task
    has none by design)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.instances = 0
        self.batches = 0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.instances = self.batches = 0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        labels = getattr(batch, "labels", None)
        if labels is not None:
            self.instances += int(labels.shape[0])
            self.batches += 1

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.batches and not self.instances and trainer.is_global_zero:
            self.log(
                f"[yellow]warning:[/yellow] epoch {trainer.current_epoch + 1}: none of its {self.batches} training "
                "batches held an instance after augmentation, so the model learned nothing from them. Check that "
                "the labels were read (`lucid data check`) and that the fields' survival rule keeps instances "
                "after a crop (a task without boxes needs a field with survive_alone)."
            )
