"""The default recipe's schedule, derived from the run's length and batch (``auto`` values).

The spec's numbers (warmup 3 epochs, EMA ramp 2000 updates, close-mosaic 10
epochs, lr 0.01 at batch 64 scaled linearly) are COCO-scale choices: a few
percent of a run of hundreds of thousands of steps. On a short run (30 epochs
of 64 images at batch 8: 240 steps) the same numbers cover the whole run, and
linear scaling gives a learning rate that barely moves the weights, so the run
learns nearly nothing (docs/DECISIONS.md, "Default recipe", has the
measurements). Each ``auto`` value is the spec's number, capped to the share
of the run that number is at COCO scale:

- ``warmup_epochs: auto``: ``min(3 epochs, WARMUP_FRACTION of the steps)``;
- ``ema_tau: auto``: ``min(2000, EMA_TAU_FRACTION x steps)`` updates;
- ``close_mosaic: auto``: ``min(10, CLOSE_MOSAIC_FRACTION x epochs)`` epochs;
- ``lr_scaling: auto``: linear in the global batch ``B`` at and above the
  reference batch, not scaled down below it (``none``). Linear scaling
  assumes a step of ``B / reference`` times the gradient noise-free length; at
  batch 8 it gives 0.00125, and measured on the shapes benchmark (30 epochs,
  batch 8, MuSGD) the peak lr at batch 8 went 0.00125 -> mAP50-95 0.0005,
  0.005 -> 0.089, 0.01 -> 0.203, 0.02 -> 0.317. ``none`` keeps the spec's
  0.01, the largest value the spec vouches for.

A run of COCO length gets the spec's values unchanged; explicit numbers (every
packaged preset sets them) are never replaced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SPEC_WARMUP_EPOCHS = 3.0
SPEC_EMA_TAU = 2000.0
SPEC_CLOSE_MOSAIC = 10

WARMUP_FRACTION = 0.03
"""Warmup is at most this share of the optimizer steps (3 epochs of a 100-epoch run)."""

EMA_TAU_FRACTION = 0.25
"""The EMA ramp constant is at most this share of the optimizer steps."""

CLOSE_MOSAIC_FRACTION = 1 / 6
"""Mosaic is off for at most this share of the epochs at the end."""

FINETUNE_WARMUP_EPOCHS = 1.0
FINETUNE_WARMUP_FRACTION = 0.01
"""Starting from weights (``model.weights``), ``warmup_epochs: auto`` is ``min(1 epoch, 1 % of the steps)``:
only the new class rows and task stems are random, so a third of the fresh warm-up (docs/DECISIONS.md)."""



@dataclass(frozen=True)
class Recipe:
    """The resolved schedule numbers of a run.

    Attributes:
        lr: peak lr actually used (after batch scaling).
        lr_scaling: ``"linear"`` or ``"none"`` (how ``lr`` was scaled to the batch).
        warmup_epochs: warmup length in epochs (may be fractional).
        ema_tau: EMA ramp constant in optimizer updates.
        close_mosaic: final epochs without mosaic.
        total_steps: optimizer steps of the run the rule was applied to.
    """

    lr: float
    lr_scaling: str
    warmup_epochs: float
    ema_tau: float
    close_mosaic: int
    total_steps: int

    def describe(self, lr0: float, reference: int, batch: int, epochs: int) -> str:
        """One line for the run's log."""
        return (
            f"recipe: lr {self.lr:.4g} ({lr0:g} at batch {reference}, "
            f"{'scaled linearly' if self.lr_scaling == 'linear' else 'not scaled'} to batch {batch}), "
            f"warmup {self.warmup_epochs:.3g} epochs, EMA tau {self.ema_tau:.4g} updates, "
            f"mosaic off for the last {self.close_mosaic} of {epochs} epochs ({self.total_steps} optimizer steps)"
        )


def scale_lr(lr0: float, batch: int, reference: int, scaling: str) -> tuple[float, str]:
    """``(lr, how)``: ``lr0`` (defined at ``reference``) scaled to the global ``batch``."""
    if batch < 1:
        raise ValueError(f"invalid batch size {batch}")
    if scaling == "auto":
        scaling = "linear" if batch >= reference else "none"
    if scaling not in ("linear", "none"):
        raise ValueError(f"unknown lr scaling {scaling!r} (auto, linear or none)")
    return (lr0 * batch / reference if scaling == "linear" else lr0), scaling


def auto_warmup_epochs(total_steps: int, steps_per_epoch: int, finetune: bool = False) -> float:
    """``min(3 epochs, WARMUP_FRACTION x total_steps)``, in epochs; ``finetune``: ``min(1 epoch, 1 %)``."""
    epochs, fraction = (FINETUNE_WARMUP_EPOCHS, FINETUNE_WARMUP_FRACTION) if finetune else (
        SPEC_WARMUP_EPOCHS, WARMUP_FRACTION)
    return min(epochs, fraction * max(1, total_steps) / max(1, steps_per_epoch))


def auto_ema_tau(total_steps: int) -> float:
    """``min(2000, EMA_TAU_FRACTION x total_steps)`` updates (at least 1)."""
    return min(SPEC_EMA_TAU, max(1.0, EMA_TAU_FRACTION * max(1, total_steps)))


def auto_close_mosaic(epochs: int) -> int:
    """``min(10, round(CLOSE_MOSAIC_FRACTION x epochs))`` epochs."""
    return min(SPEC_CLOSE_MOSAIC, int(math.floor(CLOSE_MOSAIC_FRACTION * max(1, epochs) + 0.5)))


def resolve_recipe(
    *,
    lr: float,
    lr_reference_batch: int,
    lr_scaling: str,
    warmup_epochs: float | str,
    ema_tau: float | str,
    close_mosaic: int | str,
    epochs: int,
    steps_per_epoch: int,
    global_batch: int,
    finetune: bool = False,
) -> Recipe:
    """Resolve the ``auto`` values of one run (explicit numbers pass through).

    Args:
        lr, lr_reference_batch, lr_scaling: the peak lr, the batch it is defined at, and
            ``"auto"``, ``"linear"`` or ``"none"``.
        warmup_epochs, ema_tau, close_mosaic: a number or ``"auto"``.
        epochs: ``trainer.max_epochs``.
        steps_per_epoch: optimizer steps per epoch (batches per rank / gradient accumulation).
        global_batch: images per optimizer step over every rank.
        finetune: the run starts from weights (a shorter ``auto`` warm-up).
    """
    epochs = max(1, int(epochs))
    steps_per_epoch = max(1, int(steps_per_epoch))
    total = epochs * steps_per_epoch
    peak, how = scale_lr(lr, global_batch, lr_reference_batch, lr_scaling)
    warmup = auto_warmup_epochs(total, steps_per_epoch, finetune) if warmup_epochs == "auto" else float(warmup_epochs)
    tau = auto_ema_tau(total) if ema_tau == "auto" else float(ema_tau)
    close = auto_close_mosaic(epochs) if close_mosaic == "auto" else int(close_mosaic)
    return Recipe(lr=peak, lr_scaling=how, warmup_epochs=warmup, ema_tau=tau, close_mosaic=close, total_steps=total)
