"""Exponential moving average (EMA) of a model's float parameters and buffers.

``shadow <- d * shadow + (1 - d) * current`` after every optimizer step, with
``d(t) = decay * (1 - exp(-t / tau))`` (``t`` = number of updates so far, default
``decay`` 0.9999 and ``tau`` 2000): the ramp lets the average follow the fast
early changes instead of sticking to the random initialisation. Non-float
buffers (e.g. BatchNorm ``num_batches_tracked``) are copied, not averaged.

Plain class without Lightning: a callback swaps the average in for validation
(:meth:`ModelEMA.swap` twice, or :meth:`ModelEMA.swapped`) and stores
:meth:`ModelEMA.state_dict` in the checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from lucidyolo.errors import UserError


def _model_state(model: nn.Module) -> dict[str, Tensor]:
    """Parameters and buffers by name (live tensors, not copies)."""
    state: dict[str, Tensor] = dict(model.named_parameters())
    state.update(model.named_buffers())
    return state


class ModelEMA:
    """EMA of every float parameter and buffer of ``model``.

    Args:
        model: the trained model; its current values start the average.
        decay: asymptotic decay.
        tau: ramp time constant in updates.
        updates: number of updates already done (when resuming).
    """

    def __init__(
        self, model: nn.Module, decay: float = 0.9999, tau: float = 2000.0, updates: int = 0
    ) -> None:
        if not 0.0 <= decay < 1.0 or tau <= 0:
            raise ValueError(f"need 0 <= decay < 1 and tau > 0, got decay={decay}, tau={tau}")
        self.decay = decay
        self.tau = tau
        self.updates = updates
        self.shadow: dict[str, Tensor] = {
            k: v.detach().clone() for k, v in _model_state(model).items()
        }

    def current_decay(self, updates: int | None = None) -> float:
        """``d(t)`` for ``t`` = ``updates`` (default: the updates done so far)."""
        t = self.updates if updates is None else updates
        return self.decay * (1.0 - math.exp(-t / self.tau))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold the model's current values into the average (call after each optimizer step)."""
        self.updates += 1
        d = self.current_decay()
        state = _model_state(model)
        if state.keys() != self.shadow.keys():
            raise RuntimeError(
                "ModelEMA.update: the model's parameters/buffers differ from the tracked ones"
            )
        avg_shadow, avg_current = [], []
        for name, current in state.items():
            shadow = self.shadow[name]
            if (
                shadow.device != current.device
            ):  # the model moved (e.g. to the GPU) after EMA creation
                shadow = self.shadow[name] = shadow.to(current.device)
            if shadow.is_floating_point():
                avg_shadow.append(shadow)
                avg_current.append(current.detach().to(shadow.dtype))
            else:
                shadow.copy_(current)
        if avg_shadow:
            # lerp(s, c, w) = s + w (c - s) = d s + (1 - d) c with w = 1 - d
            torch._foreach_lerp_(avg_shadow, avg_current, 1.0 - d)

    @torch.no_grad()
    def copy_to(self, model: nn.Module) -> None:
        """Overwrite the model's parameters and buffers with the average."""
        for name, target in self._matched(model).items():
            target.copy_(self.shadow[name])

    @torch.no_grad()
    def swap(self, model: nn.Module) -> None:
        """Exchange the model's values and the average in place; calling twice restores both."""
        for name, target in self._matched(model).items():
            shadow = self.shadow[name].to(target.device)
            tmp = target.detach().clone()
            target.copy_(shadow)
            self.shadow[name] = tmp.to(shadow.dtype)

    @contextmanager
    def swapped(self, model: nn.Module) -> Iterator[nn.Module]:
        """Context in which ``model`` holds the average (e.g. for validation)."""
        self.swap(model)
        try:
            yield model
        finally:
            self.swap(model)

    def to(self, device: torch.device | str) -> ModelEMA:
        """Move the average to ``device``."""
        self.shadow = {k: v.to(device) for k, v in self.shadow.items()}
        return self

    def state_dict(self) -> dict[str, Any]:
        """Plain types and tensors: ``decay``, ``tau``, ``updates``, ``shadow`` (name -> tensor)."""
        return {
            "decay": self.decay,
            "tau": self.tau,
            "updates": self.updates,
            "shadow": {k: v.detach().clone() for k, v in self.shadow.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`; the tracked names and shapes must match."""
        shadow = state["shadow"]
        missing = sorted(self.shadow.keys() - shadow.keys())
        unexpected = sorted(shadow.keys() - self.shadow.keys())
        mismatched = [
            k for k in self.shadow.keys() & shadow.keys() if self.shadow[k].shape != shadow[k].shape
        ]
        if missing or unexpected or mismatched:
            raise UserError(
                "the EMA weights in the checkpoint do not fit this model "
                f"(missing {missing[:3]}, unexpected {unexpected[:3]}, shape mismatch {sorted(mismatched)[:3]})",
                why="the checkpoint was written for a different model variant, task or class count",
                fix="resume with the same model settings the checkpoint was trained with",
            )
        self.decay = float(state["decay"])
        self.tau = float(state["tau"])
        self.updates = int(state["updates"])
        self.shadow = {
            k: shadow[k].detach().to(device=v.device, dtype=v.dtype).clone()
            for k, v in self.shadow.items()
        }

    def _matched(self, model: nn.Module) -> dict[str, Tensor]:
        state = _model_state(model)
        if state.keys() != self.shadow.keys():
            raise RuntimeError(
                "ModelEMA: the model's parameters/buffers differ from the tracked ones"
            )
        return state
