"""The detection objective: decode both branches, assign, compute and mix the branch losses.

One module so the whole objective region (decode, assignment, dual loss) can be
compiled as one graph: there is no Python control flow on tensor values and no
``.item()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from lucidyolo.assign.one_to_one import OneToOneAssigner
from lucidyolo.assign.one_to_one import o2o_assigner as default_o2o_assigner
from lucidyolo.assign.tal import TaskAlignedAssigner
from lucidyolo.assign.tal import o2m_assigner as default_o2m_assigner
from lucidyolo.losses.branch import BranchLoss
from lucidyolo.losses.dual import mix_branches, progressive_alpha
from lucidyolo.structures.box_coder import BoxDecoder, decode_xyxy


class DetectionCriterion(nn.Module):
    """Progressive dual-branch detection loss.

    Args:
        o2m_assigner: assigner of the one-to-many branch (default STAL top-10).
        o2o_assigner: assigner of the one-to-one branch (default STAL top-7, single best).
        branch_loss: per-branch loss with its gains (default 7.5 box, 0.5 cls, 6.0 l1).
        branch_terms: task terms computed per branch from that branch's assignment
            (mask coefficients, keypoints); see :class:`BranchTerm`. Their gained sum is
            added to the branch total, so the progressive ``alpha`` mixes them too.
        global_terms: task terms computed once per batch from the whole output (the
            training-only semantic head); see :class:`GlobalTerm`. Added unmixed.
        branch_inputs: top-level output keys every branch term also sees in its
            ``branch`` dict (seg prototypes, shared by both branches).
        box_decoder: ``box_decoder(branch, anchors, strides) -> (B, A, D)`` decoded
            boxes in the form the assigners and ``branch_loss`` compare (default:
            ``xyxy`` px from the raw ltrb ``boxes``; a rotated task decodes ``[cx,
            cy, w, h, theta]`` from its ltrb and angle stems).
        gt_boxes_key: the padded ground-truth field holding boxes of that form
            (``boxes`` xyxy by default, ``rboxes`` for rotated boxes).
        alpha_schedule: ``(start, end)`` of the progressive o2m weight
            (:meth:`epoch_weight`; the config's ``model.alpha_start`` / ``alpha_end``).
    """

    def __init__(
        self,
        o2m_assigner: TaskAlignedAssigner | None = None,
        o2o_assigner: OneToOneAssigner | None = None,
        branch_loss: BranchLoss | None = None,
        branch_terms: Sequence[nn.Module] = (),
        global_terms: Sequence[nn.Module] = (),
        branch_inputs: Sequence[str] = (),
        box_decoder: BoxDecoder | None = None,
        gt_boxes_key: str = "boxes",
        alpha_schedule: tuple[float, float] = (0.8, 0.1),
    ) -> None:
        super().__init__()
        self.o2m_assigner = o2m_assigner if o2m_assigner is not None else default_o2m_assigner()
        self.o2o_assigner = o2o_assigner if o2o_assigner is not None else default_o2o_assigner()
        self.branch_loss = branch_loss if branch_loss is not None else BranchLoss()
        self.task_branch_terms = nn.ModuleList(branch_terms)
        self.task_global_terms = nn.ModuleList(global_terms)
        self.branch_inputs = tuple(branch_inputs)
        self.box_decoder: BoxDecoder = box_decoder or decode_xyxy
        self.gt_boxes_key = gt_boxes_key
        self.alpha_schedule = alpha_schedule

    def epoch_weight(self, epoch: int, max_epochs: int) -> float:
        """The o2m weight ``alpha`` the engine passes to :meth:`forward` during 0-based ``epoch`` of ``max_epochs``."""
        start, end = self.alpha_schedule
        return progressive_alpha(epoch, max_epochs, start, end)

    def branch_terms(
        self,
        branch: Mapping[str, Tensor],
        assigner: TaskAlignedAssigner,
        anchors: Tensor,
        strides: Tensor,
        targets: Mapping[str, Tensor],
    ) -> dict[str, Tensor]:
        """Decode, assign (on detached predictions) and compute one branch's terms."""
        pred_boxes = self.box_decoder(branch, anchors, strides)  # (B, A, D) px, with grad
        assignment = assigner(
            branch["logits"].detach().sigmoid(),
            pred_boxes.detach(),
            anchors,
            targets["labels"],
            targets[self.gt_boxes_key],
            targets["mask"],
        )
        terms = self.branch_loss(branch["logits"], pred_boxes, strides, assignment)
        return _add_task_terms(terms, self.task_branch_terms, branch, assignment, anchors, strides, targets)

    def forward(
        self, outputs: Mapping[str, Any], targets: Mapping[str, Tensor], alpha: float | Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Objective of one batch.

        Args:
            outputs: model output dict: ``o2m`` and ``o2o`` each with ``boxes (B, A, 4)`` raw
                ltrb in stride units and ``logits (B, A, C)``; ``anchors (A, 2)`` px;
                ``strides (A,)``.
            targets: padded GT: ``boxes (B, M, 4)`` xyxy px, ``labels (B, M)`` long,
                ``mask (B, M)`` bool, optionally ``ignore (B, M)`` bool: ignore regions
                (COCO crowd) never take part in assignment (as if absent).
            alpha: o2m weight, :meth:`epoch_weight` of the current epoch.

        Returns:
            total: 0-d objective.
            terms: ``o2m/{box,cls,l1,total,num_fg}``, ``o2o/...`` and the alpha-mixed
                ``box``, ``cls``, ``l1`` (all before gains except the totals).
        """
        anchors, strides = outputs["anchors"], outputs["strides"]
        if "ignore" in targets:
            targets = {**targets, "mask": targets["mask"] & ~targets["ignore"]}
        shared = {key: outputs[key] for key in self.branch_inputs}
        o2m = self.branch_terms({**outputs["o2m"], **shared}, self.o2m_assigner, anchors, strides, targets)
        o2o = self.branch_terms({**outputs["o2o"], **shared}, self.o2o_assigner, anchors, strides, targets)
        total, terms = mix_branches(o2m, o2o, alpha)
        for term in self.task_global_terms:
            values = term(outputs, targets)
            for key, value in values.items():
                terms[key] = value
                total = total + term.gains[key] * value
        return total, terms


def _add_task_terms(
    terms: dict[str, Tensor],
    modules: Sequence[nn.Module],
    branch: Mapping[str, Tensor],
    assignment: Any,
    anchors: Tensor,
    strides: Tensor,
    targets: Mapping[str, Tensor],
) -> dict[str, Tensor]:
    """Add each branch term's values (before gains) to ``terms`` and their gained sum to ``total``."""
    for term in modules:
        values = term(branch, assignment, anchors, strides, targets)
        for key, value in values.items():
            terms[key] = value
            terms["total"] = terms["total"] + term.gains[key] * value
    return terms


class BranchTerm(nn.Module):
    """Contract of a per-branch task term (documentation base; any module with this shape works).

    ``forward(branch, assignment, anchors, strides, targets) -> {name: 0-d tensor}``
    with ``branch`` the branch's stem outputs (``{name: (B, A, *shape)}``),
    ``assignment`` the branch's :class:`~lucidyolo.assign.assignment.Assignment`
    (``gt_index (B, A)`` selects each positive's GT row), ``anchors (A, 2)``,
    ``strides (A,)`` and ``targets`` the padded GT of the batch (task fields
    included). ``gains`` maps every returned name to its gain.
    """

    gains: dict[str, float]


class GlobalTerm(nn.Module):
    """Contract of a once-per-batch task term: ``forward(outputs, targets) -> {name: 0-d tensor}``; ``gains`` as above."""

    gains: dict[str, float]
