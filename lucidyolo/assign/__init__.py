"""Label assignment: TAL, STAL candidacy and the one-to-one selection for the NMS-free branch."""

from lucidyolo.assign.assignment import Assignment, background_assignment
from lucidyolo.assign.candidates import anchors_in_boxes, stal_candidacy_boxes
from lucidyolo.assign.one_to_one import OneToOneAssigner, keep_best_per_gt, o2o_assigner
from lucidyolo.assign.tal import TaskAlignedAssigner, o2m_assigner

__all__ = [
    "Assignment",
    "OneToOneAssigner",
    "TaskAlignedAssigner",
    "anchors_in_boxes",
    "background_assignment",
    "keep_best_per_gt",
    "o2m_assigner",
    "o2o_assigner",
    "stal_candidacy_boxes",
]
