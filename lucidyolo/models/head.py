"""The dual detection head: a one-to-many (o2m) and a one-to-one (o2o) branch with separate weights.

A branch is a dictionary of named *stems*. Each stem has one small tower per
pyramid level: two depthwise-separable units (DW 3x3 then 1x1 Conv) at hidden
width ``max(min_hidden, C // hidden_div)`` (``C`` = channels of the finest
level, N3; one hidden width for all levels), then a 1x1 conv to the stem's
per-anchor outputs. Detection registers ``boxes`` (4 raw ``l, t, r, b``) and
``logits`` (``num_classes``); tasks add their own stems (mask coefficients,
angle, keypoints) with :meth:`DualHead.add_stem` without touching detection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from lucidyolo.models.conv import Conv, DWConv


@dataclass(frozen=True)
class StemSpec:
    """What one named stem predicts per anchor.

    Attributes:
        name: output key in the branch dict (``boxes``, ``logits``, ``angle`` ...).
        shape: per-anchor output shape; the final conv has ``prod(shape)`` channels.
        hidden_div: hidden width is ``max(min_hidden, C // hidden_div)`` with ``C`` the
            channels of the finest level.
        min_hidden: lower bound of the hidden width.
        bias_init: constant initial bias of the final conv.
        activation: ``None`` or ``"tanh"`` applied to the output (seg coefficients).
        level_widths: per-level multipliers of the hidden width (finest level
            first; empty: the same width at every level). A stem whose cost
            should sit at the fine levels (keypoints) narrows the coarse ones.
        per_class: the outputs are one per class (``shape == (C,)``): starting
            from other weights maps these rows by class (:attr:`StemTower.class_params`).
    """

    name: str
    shape: tuple[int, ...]
    hidden_div: int = 3
    min_hidden: int = 16
    bias_init: float = 0.0
    activation: str | None = None
    level_widths: tuple[float, ...] = ()
    per_class: bool = False

    def hidden(self, in_channels: Sequence[int]) -> list[int]:
        """Hidden width of each level's tower."""
        # One base width for every level, from the finest level's channels (see
        # docs/decisions/model.md: this is what puts n/s/m on the paper's budget).
        base = max(self.min_hidden, in_channels[0] // self.hidden_div)
        factors = self.level_widths or (1.0,) * len(in_channels)
        if len(factors) != len(in_channels):
            raise ValueError(f"stem {self.name!r}: {len(factors)} level widths for {len(in_channels)} levels")
        return [max(1, int(base * f)) for f in factors]

    @property
    def out_channels(self) -> int:
        return math.prod(self.shape)


def class_prior_bias(p: float = 0.01) -> float:
    """Logit of the prior foreground probability ``p``: ``-log((1 - p) / p)``."""
    return -math.log((1.0 - p) / p)


def det_stems(num_classes: int) -> list[StemSpec]:
    """The detection stems: 4 raw box distances and ``num_classes`` logits at prior 0.01."""
    return [
        # bias 1.0: every anchor starts with a box two strides wide instead of a
        # degenerate point, so the IoU loss has a non-zero overlap from step 0.
        StemSpec("boxes", (4,), bias_init=1.0),
        StemSpec("logits", (num_classes,), bias_init=class_prior_bias(0.01), per_class=True),
    ]


class StemTower(nn.Module):
    """One stem for every level: ``(B, C_l, H_l, W_l)`` -> ``(B, prod(shape), H_l, W_l)``.

    Args:
        spec: what the stem predicts.
        in_channels: channels of each pyramid level.
    """

    def __init__(self, spec: StemSpec, in_channels: Sequence[int]) -> None:
        super().__init__()
        self.spec = spec
        towers = []
        for c, hidden in zip(in_channels, spec.hidden(in_channels), strict=True):
            final = nn.Conv2d(hidden, spec.out_channels, 1)
            nn.init.constant_(final.bias, spec.bias_init)
            towers.append(
                nn.Sequential(
                    DWConv(c, c, 3),
                    Conv(c, hidden, 1),
                    DWConv(hidden, hidden, 3),
                    Conv(hidden, hidden, 1),
                    final,
                )
            )
        self.levels = nn.ModuleList(towers)

    @property
    def class_params(self) -> tuple[str, ...]:
        """Local names of the parameters whose dim 0 indexes classes (the final convs of a per-class stem).

        Weight transfer reads this attribute on any module (a plugin's model may declare it too).
        """
        if not self.spec.per_class:
            return ()
        return tuple(f"levels.{i}.{len(t) - 1}.{p}" for i, t in enumerate(self.levels) for p in ("weight", "bias"))

    def forward(self, feats: Sequence[Tensor]) -> Tensor:
        """Per-level features to ``(B, A, *shape)`` with anchors level by level, row-major."""
        b = feats[0].shape[0]
        outs = [tower(f).flatten(2) for tower, f in zip(self.levels, feats, strict=True)]  # (B, K, H*W)
        out = torch.cat(outs, dim=2).transpose(1, 2)  # (B, A, K)
        if self.spec.activation == "tanh":
            out = out.tanh()
        return out.reshape(b, -1, *self.spec.shape)


class HeadBranch(nn.Module):
    """A dictionary of named :class:`StemTower` sharing the same input features.

    Args:
        stems: the stems of this branch.
        in_channels: channels of each pyramid level.
    """

    def __init__(self, stems: Sequence[StemSpec], in_channels: Sequence[int]) -> None:
        super().__init__()
        self.in_channels = tuple(in_channels)
        self.stems = nn.ModuleDict({s.name: StemTower(s, in_channels) for s in stems})

    def add_stem(self, spec: StemSpec) -> None:
        """Register another named output (a task stem)."""
        if spec.name in self.stems:
            raise ValueError(f"stem {spec.name!r} already exists")
        self.stems[spec.name] = StemTower(spec, self.in_channels)

    def forward(self, feats: Sequence[Tensor]) -> dict[str, Tensor]:
        """Features ``(N3, N4, N5)`` to ``{name: (B, A, *shape)}`` (e.g. ``boxes (B, A, 4)``)."""
        return {name: stem(feats) for name, stem in self.stems.items()}


class DualHead(nn.Module):
    """Two :class:`HeadBranch` with identical structure and separate weights.

    Args:
        stems: stems of both branches.
        in_channels: channels of each pyramid level.
    """

    branch_names = ("o2m", "o2o")

    def __init__(self, stems: Sequence[StemSpec], in_channels: Sequence[int]) -> None:
        super().__init__()
        self.o2m = HeadBranch(stems, in_channels)
        self.o2o = HeadBranch(stems, in_channels)

    def add_stem(self, spec: StemSpec) -> None:
        """Register a task stem in both branches."""
        self.o2m.add_stem(spec)
        self.o2o.add_stem(spec)

    def forward(self, feats: Sequence[Tensor]) -> dict[str, dict[str, Tensor]]:
        """``{"o2m": {name: (B, A, *shape)}, "o2o": {...}}``."""
        return {"o2m": self.o2m(feats), "o2o": self.o2o(feats)}
