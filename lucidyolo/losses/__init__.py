"""Training losses: IoU terms, the per-branch detection loss and the progressive dual mix.

``DetectionCriterion`` lives in :mod:`lucidyolo.losses.criterion`; it is exported
lazily because it imports the assigners, which themselves import
:mod:`lucidyolo.losses.iou`.
"""

from typing import Any

from lucidyolo.losses.branch import BranchLoss
from lucidyolo.losses.dual import mix_branches, progressive_alpha
from lucidyolo.losses.iou import box_ciou, box_iou

__all__ = [
    "BranchLoss",
    "DetectionCriterion",
    "box_ciou",
    "box_iou",
    "mix_branches",
    "progressive_alpha",
]


def __getattr__(name: str) -> Any:
    if name == "DetectionCriterion":
        from lucidyolo.losses.criterion import DetectionCriterion

        return DetectionCriterion
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
