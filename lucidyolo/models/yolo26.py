"""The full trained YOLO26 model: the trunk (backbone + PAN neck) + dual head (both branches, always)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from lucidyolo.models.head import DualHead, StemSpec
from lucidyolo.models.scales import Scale
from lucidyolo.models.trunk import Trunk
from lucidyolo.structures.box_coder import make_anchors


class AnchorCache(nn.Module):
    """Anchor centres and strides per input size, computed once per ``(sizes, device, dtype)``.

    Args:
        strides: stride of each level.
    """

    def __init__(self, strides: Sequence[int]) -> None:
        super().__init__()
        self.strides = tuple(strides)
        self._cache: dict[tuple, tuple[Tensor, Tensor]] = {}

    def forward(self, feats: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """``anchors (A, 2)`` px and ``strides (A,)`` for feature maps ``(B, C_l, H_l, W_l)``."""
        sizes = tuple((int(f.shape[2]), int(f.shape[3])) for f in feats)
        ref = feats[0]
        key = (sizes, ref.device, ref.dtype)
        if key not in self._cache:
            if len(self._cache) > 16:  # multi-scale training visits many sizes; bound memory
                self._cache.clear()
            self._cache[key] = make_anchors(sizes, self.strides, dtype=ref.dtype, device=ref.device)
        return self._cache[key]


class YOLO26(Trunk):
    """Trunk (backbone + PAN neck) + dual head.

    ``forward(images (B, 3, H, W))`` returns, in train and eval mode alike::

        {"o2m": {"boxes": (B, A, 4), "logits": (B, A, C), ...task stems},
         "o2o": {... same keys ...},
         "anchors": (A, 2), "strides": (A,), ...outputs of ``extras`` (e.g. "protos")}

    ``boxes`` are raw ``l, t, r, b`` in stride units (decode with
    :func:`lucidyolo.structures.box_coder.ltrb_to_xyxy`). The inference graph
    (trunk + o2o, BatchNorm folded, top-k) is built from a model by
    :func:`lucidyolo.models.deploy.make_deploy_model`; this module does not know
    it exists, so the dependency runs one way.

    Args:
        scale: the variant's row of the scale table.
        stems: stems of both head branches (see :func:`~lucidyolo.models.head.det_stems`).
        variant: variant name, kept for summaries and checkpoints.
        task: task name, kept for summaries and checkpoints.
    """

    def __init__(self, scale: Scale, stems: Sequence[StemSpec], variant: str = "", task: str = "") -> None:
        super().__init__(scale, neck=True)
        self.scale = scale
        self.variant = variant
        self.task = task
        self.head = DualHead(stems, self.out_channels)
        # Task modules that read the neck features and add top-level outputs (seg
        # prototypes): see :func:`run_extras`. A module's ``train_only`` attribute
        # names its submodules the deployed graph removes (the semantic head).
        self.extras = nn.ModuleDict()
        # Training-only task modules that forward does not run and the deployed graph
        # drops; the task's criterion reads them (the keypoint residual density).
        self.aux = nn.ModuleDict()
        self.anchor_cache = AnchorCache(self.strides)
        self.num_classes = next(s.shape[0] for s in stems if s.name == "logits")

    def features(self, images: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Trunk only: images ``(B, 3, H, W)`` to neck outputs ``(N3, N4, N5)``."""
        return super().forward(images)

    def forward(self, images: Tensor) -> dict:
        """See the class docstring for the returned keys and shapes."""
        feats = self.features(images)
        out: dict = self.head(feats)
        out["anchors"], out["strides"] = self.anchor_cache(feats)
        out.update(run_extras(self.extras, feats))
        return out


def run_extras(extras: nn.ModuleDict, feats: Sequence[Tensor]) -> dict[str, Tensor]:
    """Top-level outputs of the task modules: a module returns one tensor (kept under its
    name) or a dict of named tensors (merged), e.g. ``{"protos": (B, P, Hp, Wp)}``."""
    out: dict[str, Tensor] = {}
    for name, module in extras.items():
        value = module(feats)
        if isinstance(value, dict):
            out.update(value)
        else:
            out[name] = value
    return out


def extra_output_names(extras: nn.ModuleDict) -> tuple[str, ...]:
    """Names of :func:`run_extras`'s outputs, in order (a module may declare ``outputs``)."""
    names: list[str] = []
    for name, module in extras.items():
        names.extend(getattr(module, "outputs", (name,)))
    return tuple(names)
