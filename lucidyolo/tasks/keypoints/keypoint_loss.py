"""Keypoint (pose) training terms: residual log-likelihood estimation (RLE) and an OKS loss.

Spec (30-objective.md, pose): "residual log-likelihood estimation (RLE): per axis,
L = -log Q(r) - log G(r) + log sigma, r = (gt - pred) / sigma with sigma =
sigmoid(raw sigma); Q a unit Laplace; G a small RealNVP flow over R^2 [...]; the
residual normalised per axis by the assigned GT box size (floor 1 px). Keypoints
with visibility 0 are excluded; v = 1 and v = 2 count equally. One flow shared by
both branches. Gain 1.0. `keypoint_loss: laplace_nll` = the same without the flow
(the control arm). Optional OKS loss term (default gain 0)."

Inputs (a branch term, see :class:`~lucidyolo.losses.criterion.BranchTerm`):

- ``branch["kpts"] (B, A, K, 3)``: raw x, y offsets in stride units (the predicted
  point is ``p = anchor + raw * stride`` px, ``anchors (A, 2)`` px, ``strides (A,)``)
  and a raw visibility logit (the published layout's third channel).
- ``branch["kpt_sigma"] (B, A, K, 2)`` raw; ``sigma = sigmoid(raw)`` per axis.
- ``assignment.fg_mask (B, A)`` and ``assignment.gt_index (B, A)`` pick each
  positive's GT row.
- ``targets["keypoints"] (B, M, K, 2)`` px, ``targets["visibility"] (B, M, K)``
  (0 absent, 1 / 2 present, counted alike), ``targets["boxes"] (B, M, 4)`` xyxy px.

For a positive anchor with GT ``g`` let ``(w, h)`` be the GT box sides floored at
1 px. For each visible point (``N`` positives, ``V`` visible (positive, point)
pairs)::

    r_a   = (gt_a - p_a) / size_a / sigma_a             a in {x, y}, size = (w, h)
    L     = sum_a (|r_a| + log 2 + log sigma_a) - log G(r_x, r_y)
    kpt   = sum L / max(V, 1)        (V, N' counted over the global batch)

``|r| + log 2`` is ``-log Q`` of the unit Laplace; ``G`` is the flow
(:class:`~lucidyolo.tasks.keypoints.realnvp.RealNVP2D`), one joint log density per point.
``laplace_nll`` drops the ``log G`` term. The term owns the flow and the criterion
calls the same term for both branches, so both branches share (and train) one flow.

Visibility: BCE of each positive's point logits against ``visibility > 0``, mean
over the ``N K`` (positive, point) pairs (``kvis``). The published layout predicts it
and its decode scores a point by it, so lucid trains it (docs/decisions/keypoints.md).

OKS, over the ``N'`` positives with at least one visible point (``d`` px distance,
``area = w h``, ``sigma_k`` the per-point OKS constants)::

    OKS   = sum_visible exp(-d^2 / (2 area (2 sigma_k)^2)) / num_visible
    oks   = sum (1 - OKS) / max(N', 1)

Vectorised: positives are gathered with ``nonzero`` on ``fg_mask`` (one device sync
per call), visible pairs with a boolean mask; no loop over instances, anchors or
points. Everything runs in float32 outside autocast. With no positive (or no visible
point) both terms are exact zeros that still backpropagate, and the flow still runs
(on an empty batch) so its parameters stay in the graph.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lucidyolo.assign.assignment import Assignment
from lucidyolo.losses.normaliser import global_normaliser
from lucidyolo.tasks.keypoints.realnvp import RealNVP2D

KEYPOINT_LOSS_KINDS = ("rle", "laplace_nll")
DEFAULT_OKS_SIGMA = 0.072
_LOG_2 = math.log(2.0)


class KeypointTerm(nn.Module):
    """RLE (or Laplace NLL) keypoint loss and the OKS loss (branch terms ``kpt`` and ``oks``; see the module doc).

    Args:
        num_keypoints: ``K``.
        kind: ``"rle"`` (Laplace x RealNVP flow) or ``"laplace_nll"`` (no flow, the control arm).
        keypoint_gain: gain of ``kpt``.
        oks_gain: gain of ``oks`` (0 by default: computed and logged, not trained on).
        visibility_gain: gain of ``kvis``.
        sigmas: ``K`` OKS constants ``sigma_k`` (default 0.072 for every point).
    """

    def __init__(
        self,
        num_keypoints: int,
        kind: str = "rle",
        keypoint_gain: float = 1.0,
        oks_gain: float = 0.0,
        sigmas: Sequence[float] | None = None,
        flow: nn.Module | None = None,
        visibility_gain: float = 1.0,
    ) -> None:
        super().__init__()
        if kind not in KEYPOINT_LOSS_KINDS:
            raise ValueError(f"unknown keypoint loss {kind!r}; expected one of {KEYPOINT_LOSS_KINDS}")
        self.num_keypoints = int(num_keypoints)
        if self.num_keypoints <= 0:
            raise ValueError(f"num_keypoints must be positive, got {num_keypoints}")
        if sigmas is None:
            sigmas = [DEFAULT_OKS_SIGMA] * self.num_keypoints
        sigmas = [float(s) for s in sigmas]
        if len(sigmas) != self.num_keypoints:
            raise ValueError(f"need {self.num_keypoints} OKS sigmas (one per keypoint), got {len(sigmas)}")
        self.kind = kind
        self.gains = {"kpt": keypoint_gain, "oks": oks_gain, "kvis": visibility_gain}
        # Non-persistent: follows .to(device) but is configuration, not checkpoint state.
        self.register_buffer("oks_sigmas", torch.tensor(sigmas, dtype=torch.float32), persistent=False)
        # The flow lives in the model (the published layout's home for it) when the task passes it in.
        self.flow = (flow if flow is not None else RealNVP2D()) if kind == "rle" else None

    def extra_repr(self) -> str:
        return (
            f"num_keypoints={self.num_keypoints}, kind={self.kind!r}, "
            f"keypoint_gain={self.gains['kpt']}, oks_gain={self.gains['oks']}, visibility_gain={self.gains['kvis']}"
        )

    def forward(
        self,
        branch: Mapping[str, Tensor],
        assignment: Assignment,
        anchors: Tensor,
        strides: Tensor,
        targets: Mapping[str, Tensor],
    ) -> dict[str, Tensor]:
        """``{"kpt", "oks", "kvis"}`` 0-d float32 before the gains; ``branch`` holds ``kpts`` and ``kpt_sigma``."""
        kpts, raw_sigma = branch["kpts"], branch["kpt_sigma"]
        # Outside autocast: log sigma and the flow's log-det lose too much in half precision.
        with torch.autocast(device_type=kpts.device.type, enabled=False):
            return self._loss(kpts.float(), raw_sigma.float(), assignment, anchors.float(), strides.float(), targets)

    def _loss(
        self,
        kpts: Tensor,
        raw_sigma: Tensor,
        assignment: Assignment,
        anchors: Tensor,
        strides: Tensor,
        targets: Mapping[str, Tensor],
    ) -> dict[str, Tensor]:
        b_idx, a_idx = assignment.fg_mask.nonzero(as_tuple=True)  # (N,) each
        g_idx = assignment.gt_index[b_idx, a_idx].long()
        rows = kpts[b_idx, a_idx]  # (N, K, 3)
        pred = anchors[a_idx][:, None, :] + rows[..., :2] * strides.reshape(-1)[a_idx][:, None, None]  # (N, K, 2)
        gt = targets["keypoints"][b_idx, g_idx].float()  # (N, K, 2)
        visible = targets["visibility"][b_idx, g_idx] > 0  # (N, K)
        box = targets["boxes"][b_idx, g_idx].float()  # (N, 4)
        size = (box[:, 2:] - box[:, :2]).clamp(min=1.0)  # (N, 2) floored w, h

        # Absent points may carry any coordinates (0, NaN): replace them before any
        # arithmetic so nothing non-finite reaches the backward pass.
        gt = torch.where(visible[..., None], gt, pred.detach())
        kpt = self._kpt(pred, gt, raw_sigma[b_idx, a_idx], size, visible)
        oks = self._oks(pred, gt, size, visible)
        kvis = F.binary_cross_entropy_with_logits(rows[..., 2], visible.float(), reduction="sum")
        pairs = visible.new_full((), visible.numel(), dtype=torch.float32)  # N K (a bool tensor would be 1)
        return {"kpt": kpt, "oks": oks, "kvis": kvis / global_normaliser(pairs)}

    def _kpt(self, pred: Tensor, gt: Tensor, raw_sigma: Tensor, size: Tensor, visible: Tensor) -> Tensor:
        """Mean RLE / Laplace NLL over the visible (positive, point) pairs."""
        sigma = torch.sigmoid(raw_sigma[visible])  # (V, 2)
        log_sigma = F.logsigmoid(raw_sigma[visible])  # exact where sigmoid underflows
        size = size[:, None, :].expand_as(pred)[visible]  # (V, 2)
        r = (gt[visible] - pred[visible]) / size / sigma  # (V, 2)
        nll = (r.abs() + _LOG_2 + log_sigma).sum(-1)  # (V,)
        if self.flow is not None:
            nll = nll - self.flow.log_prob(r)
        return nll.sum() / global_normaliser(visible.sum())

    def _oks(self, pred: Tensor, gt: Tensor, size: Tensor, visible: Tensor) -> Tensor:
        """Mean ``1 - OKS`` over the positives with a visible point."""
        d2 = (pred - gt).square().sum(-1)  # (N, K)
        area = size.prod(-1)  # (N,)
        kappa = 2.0 * area[:, None] * (2.0 * self.oks_sigmas).square()  # (N, K)
        vis = visible.float()
        count = vis.sum(-1)  # (N,)
        oks = (torch.exp(-d2 / kappa) * vis).sum(-1) / count.clamp(min=1)
        has_point = (count > 0).float()
        return ((1.0 - oks) * has_point).sum() / global_normaliser(has_point.sum())
