"""Public constructors: ``create_model`` and ``list_models`` over the variant table."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from lucidyolo.errors import ConfigError
from lucidyolo.models.head import StemSpec, det_stems
from lucidyolo.models.scales import SCALES, variant_key
from lucidyolo.models.yolo26 import YOLO26


def list_models(pattern: str = "*") -> list[str]:
    """Names ``yolo26{variant}`` matching a shell-style ``pattern`` (e.g. ``"yolo26[nsm]"``), sorted by size."""
    names = [f"yolo26{v}" for v in SCALES]
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


def create_model(
    variant: str = "n", num_classes: int = 80, extra_stems: Sequence[StemSpec] = (), label: str = "",
    class_width: int | None = None,
) -> YOLO26:
    """Build a randomly initialised YOLO26 model.

    Args:
        variant: ``n``, ``s``, ``m``, ``l`` or ``x`` (``yolo26n`` is accepted too).
        num_classes: number of classes ``C`` (>= 1).
        extra_stems: task stems added to both branches beside ``boxes`` and
            ``logits`` (mask coefficients, angle, keypoints); each becomes an
            output key of both branches.
        label: a name for summaries (the task that built it); never branched on.
        class_width: the class count the class towers are sized for (default ``num_classes``).

    Returns:
        A :class:`~lucidyolo.models.yolo26.YOLO26` whose forward returns
        ``{"o2m": {"boxes": (B, A, 4), "logits": (B, A, C), ...extra stems},
        "o2o": {...}, "anchors": (A, 2), "strides": (A,)}``.
    """
    key = variant_key(variant)
    if num_classes < 1:
        raise ConfigError(
            f"num_classes must be >= 1, got {num_classes}.", fix="set the number of classes in the dataset."
        )
    return YOLO26(SCALES[key], [*det_stems(num_classes, class_width), *extra_stems], variant=key, task=label)
