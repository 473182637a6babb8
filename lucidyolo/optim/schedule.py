"""Learning-rate schedule: linear warmup, then linear decay to ``lr0 * lrf``, per optimizer step.

Warmup multiplies the group lr by ``(step + 1) / warmup_steps`` for the first
``warmup_steps`` steps (0-based ``step``), so the very first step already moves
the weights. Decay then runs linearly from factor 1 at step ``warmup_steps`` to
factor ``lrf`` at the last step ``total_steps - 1`` and stays there.
``warmup_steps=0, lrf=1.0`` gives a constant lr (the overfit gate).
"""

from __future__ import annotations

from functools import partial

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from lucidyolo.errors import ConfigError


def warmup_linear_factor(step: int, warmup_steps: int, total_steps: int, lrf: float) -> float:
    """Multiplier of the base lr at 0-based optimizer ``step``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = max(total_steps - 1 - warmup_steps, 1)
    progress = min((step - warmup_steps) / decay_steps, 1.0)
    return 1.0 - (1.0 - lrf) * progress


def warmup_linear_schedule(
    optimizer: Optimizer, warmup_steps: int, total_steps: int, lrf: float = 0.01
) -> LambdaLR:
    """A ``LambdaLR`` for warmup + linear decay; call ``.step()`` after every ``optimizer.step()``.

    Args:
        optimizer: its param groups' ``lr`` is the peak lr ``lr0``.
        warmup_steps: optimizer steps of linear warmup (0 for none).
        total_steps: optimizer steps of the whole run (>= 1).
        lrf: final lr as a fraction of ``lr0`` (1.0 disables the decay).

    Returns:
        The scheduler.
    """
    if total_steps < 1 or warmup_steps < 0:
        raise ConfigError(
            f"invalid lr schedule: warmup_steps={warmup_steps}, total_steps={total_steps}",
            why="the schedule needs a non-negative warmup and at least one optimizer step",
            fix="check trainer.max_epochs, the batch size and the warmup epochs",
        )
    if not 0.0 < lrf <= 1.0:
        raise ConfigError(
            f"invalid final lr fraction lrf={lrf}",
            why="lrf is the final lr as a fraction of lr0 and must lie in (0, 1]",
            fix="use e.g. lrf: 0.01 (the default), or 1.0 for a constant lr",
        )
    factor = partial(
        warmup_linear_factor, warmup_steps=warmup_steps, total_steps=total_steps, lrf=lrf
    )
    return LambdaLR(optimizer, lr_lambda=factor)


def scaled_lr(lr0: float, batch_size: int, base_batch_size: int = 64) -> float:
    """Linear lr scaling with the (global) batch size: ``lr0`` is defined at ``base_batch_size``."""
    if batch_size < 1:
        raise ConfigError(f"invalid batch size {batch_size}", fix="use a batch size >= 1")
    return lr0 * batch_size / base_batch_size
