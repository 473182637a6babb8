"""Public constructors: ``create_model`` and ``list_models`` over the variant table."""

from __future__ import annotations

import fnmatch

from lucidyolo.errors import ConfigError, NotAvailableError
from lucidyolo.models.head import det_stems
from lucidyolo.models.scales import SCALES
from lucidyolo.models.yolo26 import YOLO26

TASK_ALIASES: dict[str, str] = {"det": "det", "detect": "det"}
BUILT_TASKS = ("det",)
PLANNED_TASKS = ("seg", "segment", "obb", "oriented", "pose", "keypoints")


def list_models(pattern: str = "*") -> list[str]:
    """Names ``yolo26{variant}`` matching a shell-style ``pattern`` (e.g. ``"yolo26[nsm]"``), sorted by size."""
    names = [f"yolo26{v}" for v in SCALES]
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


def _variant_key(variant: str) -> str:
    key = variant.lower().removeprefix("yolo26")
    if key not in SCALES:
        raise ConfigError(
            f"Unknown model variant {variant!r}.",
            why="variants are rows of the scale table.",
            fix=f"use one of {', '.join(SCALES)} (or {', '.join(list_models())}).",
        )
    return key


def create_model(variant: str = "n", task: str = "det", num_classes: int = 80) -> YOLO26:
    """Build a randomly initialised YOLO26 model.

    Args:
        variant: ``n``, ``s``, ``m``, ``l`` or ``x`` (``yolo26n`` is accepted too).
        task: ``det`` (alias ``detect``).
        num_classes: number of classes ``C`` (>= 1).

    Returns:
        A :class:`~lucidyolo.models.yolo26.YOLO26` whose forward returns
        ``{"o2m": {"boxes": (B, A, 4), "logits": (B, A, C)}, "o2o": {...},
        "anchors": (A, 2), "strides": (A,)}``.
    """
    key = _variant_key(variant)
    if num_classes < 1:
        raise ConfigError(
            f"num_classes must be >= 1, got {num_classes}.", fix="set the number of classes in the dataset."
        )
    task_key = TASK_ALIASES.get(task.lower())
    if task_key is None:
        if task.lower() in PLANNED_TASKS:
            raise NotAvailableError(
                f"The {task!r} model head is not built yet.",
                why="only the detection stems exist so far.",
                fix="use task 'det'.",
            )
        raise ConfigError(f"Unknown task {task!r}.", fix=f"use one of {', '.join(BUILT_TASKS)}.")
    return YOLO26(SCALES[key], det_stems(num_classes), variant=key, task=task_key)
