"""Training losses: the per-branch detection loss, the progressive dual mix and the criterion.

The IoU terms they use live in :mod:`lucidyolo.structures.box_iou`, shared with
the assigners: losses import the assigners, never the other way round.
"""

from lucidyolo.losses.branch import BranchLoss
from lucidyolo.losses.criterion import DetectionCriterion
from lucidyolo.losses.dual import mix_branches, progressive_alpha

__all__ = [
    "BranchLoss",
    "DetectionCriterion",
    "mix_branches",
    "progressive_alpha",
]
