"""One-to-one assignment for the NMS-free branch: STAL top-k, then a single anchor per GT.

The o2o head is trained so that each object fires exactly one anchor, which is
what lets decoding skip NMS. Selection order (a choice the papers leave open,
see docs/decisions/objective.md): take the STAL top-7 by alignment, resolve
anchors claimed by several GTs (largest alignment wins), then keep per GT the
single remaining anchor with the largest alignment ``t``. Resolving conflicts
first means a GT that loses its best anchor to a neighbour still keeps its
second best, instead of ending up with no positive at all.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lucidyolo.assign.tal import (
    Candidacy,
    PairIoU,
    TaskAlignedAssigner,
    resolve_conflicts,
    select_topk,
)


def keep_best_per_gt(positives: Tensor, align: Tensor) -> Tensor:
    """Keep, per GT, only the positive anchor with the largest alignment.

    Ties go to the lowest anchor index (``torch.argmax`` returns the first maximum).

    Args:
        positives: ``(B, M, A)`` bool.
        align: ``(B, M, A)`` alignment (``>= 0``).

    Returns:
        ``(B, M, A)`` bool with at most one True per GT.
    """
    a = positives.shape[-1]
    best = torch.where(positives, align, torch.full_like(align, -1.0)).argmax(
        -1, keepdim=True
    )  # (B, M, 1)
    anchor_ids = torch.arange(a, device=positives.device).view(1, 1, a)
    return positives & (anchor_ids == best)


class OneToOneAssigner(TaskAlignedAssigner):
    """STAL top-k (default 7), conflict resolution, then the single best anchor per GT.

    Args:
        topk: candidates kept per GT before the single-best selection.
        alpha, beta, min_side, surrogate_side, pair_iou, candidacy: as for
            :class:`TaskAlignedAssigner`.
    """

    def __init__(
        self,
        topk: int = 7,
        alpha: float = 1.0,
        beta: float = 6.0,
        min_side: float | None = 8.0,
        surrogate_side: float = 16.0,
        pair_iou: PairIoU | None = None,
        candidacy: Candidacy | None = None,
    ) -> None:
        super().__init__(topk, alpha, beta, min_side, surrogate_side, pair_iou=pair_iou, candidacy=candidacy)

    def positives(self, align: Tensor, candidates: Tensor) -> Tensor:
        """``(B, M, A)`` positives with at most one anchor per GT and one GT per anchor."""
        resolved = resolve_conflicts(select_topk(align, candidates, self.topk), align)[0]
        return keep_best_per_gt(resolved, align)


def o2o_assigner() -> OneToOneAssigner:
    """The one-to-one branch assigner of YOLO26: STAL candidacy, top-7, single best."""
    return OneToOneAssigner(topk=7)
