"""Optimizer (MuSGD) and learning-rate schedule."""

from lucidyolo.optim.musgd import MuSGD, newton_schulz5
from lucidyolo.optim.schedule import scaled_lr, warmup_linear_factor, warmup_linear_schedule

__all__ = ["MuSGD", "newton_schulz5", "scaled_lr", "warmup_linear_factor", "warmup_linear_schedule"]
