"""The dual detection head: a one-to-many (o2m) and a one-to-one (o2o) branch with separate weights.

A branch is a dictionary of named *stems*. Each stem has one small tower per
pyramid level (two 3x3 Conv, or two depthwise-separable units: DW 3x3 then 1x1
Conv) at hidden width ``max(min_hidden, C // hidden_div)`` (``C`` = channels of
the finest level, N3; one hidden width for all levels), then 1x1 convs to the
stem's per-anchor outputs. Widths and tower kinds are the published YOLO26
layout's, so published weights load one tensor to one tensor. Detection registers ``boxes`` (4 raw ``l, t, r, b``) and
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
class StemOutput:
    """One per-anchor output of a stem: a biased 1x1 conv on the stem's tower.

    Attributes:
        name: output key in the branch dict (``boxes``, ``logits``, ``kpt_sigma`` ...).
        shape: per-anchor output shape; the conv has ``prod(shape)`` channels.
        bias_init: constant initial bias.
        activation: ``None`` or ``"tanh"`` applied to the output.
        per_class: the outputs are one per class (``shape == (C,)``): starting
            from other weights maps these rows by class (:attr:`StemTower.class_params`).
        published: the publisher's module name of this output's convs when they do
            not sit at the end of the tower's own module (keypoint rows: ``cv4_kpts``).
    """

    name: str
    shape: tuple[int, ...]
    bias_init: float = 0.0
    activation: str | None = None
    per_class: bool = False
    published: str = ""

    @property
    def out_channels(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class StemSpec:
    """One named stem: a small tower per pyramid level and the outputs it feeds.

    The tower is two units at one hidden width ``max(min_hidden, C // hidden_div)``
    (``C`` = channels of the finest level, the same width at every level):
    ``"conv"`` = two 3x3 :class:`Conv`; ``"separable"`` = two (DW 3x3, 1x1 Conv)
    units. The stem's own output (``name``, ``shape``) is a biased 1x1 conv on the
    tower; ``extra_outputs`` add more 1x1 convs on the same tower (keypoint
    sigmas beside the keypoint rows).

    Attributes:
        name: the stem's name and the key of its own output.
        shape: per-anchor shape of its own output.
        tower: ``"conv"`` or ``"separable"``.
        hidden_div: hidden width is ``max(min_hidden, C // hidden_div)``.
        min_hidden: lower bound of the hidden width.
        bias_init: constant initial bias of its own output conv.
        activation: ``None`` or ``"tanh"`` applied to its own output.
        per_class: its own output is one row per class.
        published: the publisher's module name of this stem (``cv2``, ``cv3``,
            ``cv4``); reading published weights maps ``<published>.<level>.*`` here.
        published_output: the publisher's module name of the stem's own output
            convs when they are not the tower's third entry (``<published>.<level>.2``).
        extra_outputs: more outputs on the same tower.
    """

    name: str
    shape: tuple[int, ...]
    tower: str = "conv"
    hidden_div: int = 4
    min_hidden: int = 16
    bias_init: float = 0.0
    activation: str | None = None
    per_class: bool = False
    published: str = ""
    published_output: str = ""
    extra_outputs: tuple[StemOutput, ...] = ()

    def hidden(self, in_channels: Sequence[int]) -> int:
        """Hidden width of every level's tower."""
        # One width for every level, from the finest level's channels (the published layout).
        return max(self.min_hidden, in_channels[0] // self.hidden_div)

    @property
    def outputs(self) -> tuple[StemOutput, ...]:
        """The stem's own output first, then ``extra_outputs``."""
        own = StemOutput(self.name, self.shape, self.bias_init, self.activation, self.per_class)
        return (own, *self.extra_outputs)

    @property
    def out_channels(self) -> int:
        return math.prod(self.shape)


def class_prior_bias(p: float = 0.01) -> float:
    """Logit of the prior foreground probability ``p``: ``-log((1 - p) / p)``."""
    return -math.log((1.0 - p) / p)


def det_stems(num_classes: int, class_width: int | None = None) -> list[StemSpec]:
    """The detection stems: 4 raw box distances and ``num_classes`` logits at prior 0.01.

    Widths are the published layout's: boxes ``max(16, C // 4)`` on two 3x3 convs,
    logits ``max(C, min(classes, 100))`` on two separable units, where ``classes``
    is ``class_width`` when given (a model fine-tuned from weights of more classes
    keeps their class towers whole), else ``num_classes``.
    """
    width_classes = num_classes if class_width is None else class_width
    return [
        # bias 1.0: every anchor starts with a box two strides wide instead of a
        # degenerate point, so the IoU loss has a non-zero overlap from step 0.
        StemSpec("boxes", (4,), tower="conv", hidden_div=4, min_hidden=16, bias_init=1.0, published="cv2"),
        StemSpec("logits", (num_classes,), tower="separable", hidden_div=1, min_hidden=min(width_classes, 100),
                 bias_init=class_prior_bias(0.01), per_class=True, published="cv3"),
    ]


def _tower(kind: str, c: int, hidden: int) -> nn.Sequential:
    if kind == "conv":
        return nn.Sequential(Conv(c, hidden, 3), Conv(hidden, hidden, 3))
    if kind == "separable":
        return nn.Sequential(
            nn.Sequential(DWConv(c, c, 3), Conv(c, hidden, 1)),
            nn.Sequential(DWConv(hidden, hidden, 3), Conv(hidden, hidden, 1)),
        )
    raise ValueError(f"unknown stem tower {kind!r} (conv, separable)")


class StemTower(nn.Module):
    """One stem for every level: ``(B, C_l, H_l, W_l)`` -> ``{output: (B, A, *shape)}``.

    Args:
        spec: what the stem predicts.
        in_channels: channels of each pyramid level.

    Attributes:
        levels: one tower (two units) per level.
        outputs: per output name, one biased 1x1 conv per level.
    """

    def __init__(self, spec: StemSpec, in_channels: Sequence[int]) -> None:
        super().__init__()
        self.spec = spec
        hidden = spec.hidden(in_channels)
        self.levels = nn.ModuleList(_tower(spec.tower, c, hidden) for c in in_channels)
        self.outputs = nn.ModuleDict()
        for out in spec.outputs:
            convs = nn.ModuleList(nn.Conv2d(hidden, out.out_channels, 1) for _ in in_channels)
            for conv in convs:
                nn.init.constant_(conv.bias, out.bias_init)
            self.outputs[out.name] = convs

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(self.outputs)

    @property
    def class_params(self) -> tuple[str, ...]:
        """Local names of the parameters whose dim 0 indexes classes (the output convs of a per-class output).

        Weight transfer reads this attribute on any module (a plugin's model may declare it too).
        """
        return tuple(
            f"outputs.{out.name}.{i}.{p}" for out in self.spec.outputs if out.per_class
            for i in range(len(self.levels)) for p in ("weight", "bias")
        )

    def forward(self, feats: Sequence[Tensor]) -> dict[str, Tensor]:
        """Per-level features to ``{name: (B, A, *shape)}`` with anchors level by level, row-major."""
        b = feats[0].shape[0]
        hidden = [tower(f) for tower, f in zip(self.levels, feats, strict=True)]
        result: dict[str, Tensor] = {}
        for out in self.spec.outputs:
            convs = self.outputs[out.name]
            parts = [conv(h).flatten(2) for conv, h in zip(convs, hidden, strict=True)]  # (B, K, H*W)
            value = torch.cat(parts, dim=2).transpose(1, 2)  # (B, A, K)
            if out.activation == "tanh":
                value = value.tanh()
            result[out.name] = value.reshape(b, -1, *out.shape)
        return result


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

    @property
    def output_names(self) -> tuple[str, ...]:
        """Every stem's output keys, in stem order."""
        return tuple(name for stem in self.stems.values() for name in stem.output_names)

    def add_stem(self, spec: StemSpec) -> None:
        """Register another named output (a task stem)."""
        if spec.name in self.stems:
            raise ValueError(f"stem {spec.name!r} already exists")
        self.stems[spec.name] = StemTower(spec, self.in_channels)

    def forward(self, feats: Sequence[Tensor]) -> dict[str, Tensor]:
        """Features ``(N3, N4, N5)`` to ``{name: (B, A, *shape)}`` (e.g. ``boxes (B, A, 4)``)."""
        out: dict[str, Tensor] = {}
        for stem in self.stems.values():
            out.update(stem(feats))
        return out


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
