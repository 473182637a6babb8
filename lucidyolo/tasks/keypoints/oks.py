"""Object keypoint similarity (OKS): COCO's keypoint counterpart of box IoU.

For a prediction ``p`` and a ground truth ``g`` with ``K`` points, per-point
sigmas ``sigma_k`` and object area ``A`` (COCO: the segmentation area; here
whatever the caller passes)::

    e_k = d_k^2 / ((2 sigma_k)^2 * 2 * (A + eps))      d_k = |p_k - g_k|
    OKS = mean over the GT-visible points (v_k > 0) of exp(-e_k)

which is exactly pycocotools' ``COCOeval.computeOks`` (``eps`` is
``np.spacing(1)``, as there). A ground truth with no visible point has nothing
to compare point to point; pycocotools then measures, for every one of the K
predicted points, how far it lies *outside* the GT box grown by one box width
and height on every side (``[x - w, x + 2w] x [y - h, y + 2h]``; zero inside)
and averages ``exp(-e_k)`` over all K points. :func:`oks_matrix` does the same
when it is given the GT boxes; without them such a column is 0 (no region to
measure against: no match). COCOeval marks these ground truths ``ignore``
(``num_keypoints == 0``), so the value only decides which detections it
ignores rather than counts as false positives.

OKS is invariant to a common scale and shift of points and areas (``d^2`` and
``A`` scale together), so it can be computed in the letterboxed network frame.

Sigmas: COCO's 17 person sigmas in the person schema order (nose, eyes, ears,
shoulders, elbows, wrists, hips, knees, ankles) for ``K == 17``; any other K
uses one uniform sigma, :data:`UNIFORM_SIGMA`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

COCO_PERSON_SIGMAS: tuple[float, ...] = (
    0.026, 0.025, 0.025, 0.035, 0.035, 0.079, 0.079, 0.072, 0.072,
    0.062, 0.062, 0.107, 0.107, 0.087, 0.087, 0.089, 0.089,
)  # fmt: skip
"""COCO's per-point sigmas of the 17 person keypoints (pycocotools' ``kpt_oks_sigmas``)."""

UNIFORM_SIGMA = 0.072
"""The sigma of every point when ``K != 17`` (training and the gate)."""

_EPS = float(np.spacing(1))  # pycocotools' area guard, kept identical for parity


def keypoint_sigmas(k: int) -> list[float]:
    """Per-point OKS sigmas for ``k`` keypoints: COCO person for 17, :data:`UNIFORM_SIGMA` otherwise."""
    if k <= 0:
        raise ValueError(f"number of keypoints must be > 0, got {k}")
    if k == len(COCO_PERSON_SIGMAS):
        return list(COCO_PERSON_SIGMAS)
    return [UNIFORM_SIGMA] * k


def oks_matrix(
    pred: Tensor,
    gt: Tensor,
    gt_vis: Tensor,
    areas: Tensor,
    sigmas: Tensor | list[float] | tuple[float, ...],
    gt_boxes: Tensor | None = None,
) -> Tensor:
    """OKS of every prediction against every ground truth, as pycocotools computes it.

    Args:
        pred: ``(N, K, 2)`` predicted ``x, y``.
        gt: ``(M, K, 2)`` ground-truth ``x, y`` (same frame).
        gt_vis: ``(M, K)`` visibility; a point counts where ``> 0`` (COCO's v 1 and 2).
        areas: ``(M,)`` ground-truth object areas (same frame, squared units).
        sigmas: ``(K,)`` per-point sigmas.
        gt_boxes: optional ``(M, 4)`` ``x1, y1, x2, y2`` GT boxes, used only for
            ground truths without a visible point (pycocotools' grown-box rule,
            see the module docstring); ``None`` gives those columns 0.

    Returns:
        ``(N, M)`` OKS in ``[0, 1]``, in the promoted floating dtype of the inputs.
    """
    dtype = torch.promote_types(pred.dtype, gt.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    pred, gt = pred.to(dtype), gt.to(dtype)
    n, k = pred.shape[0], pred.shape[1]
    m = gt.shape[0]
    if gt.shape[1:] != (k, 2) or pred.shape[2:] != (2,):
        raise ValueError(f"pred (N, K, 2) and gt (M, K, 2) must agree, got {tuple(pred.shape)} and {tuple(gt.shape)}")
    sig = torch.as_tensor(sigmas, dtype=dtype, device=pred.device).reshape(-1)
    if sig.numel() != k:
        raise ValueError(f"{sig.numel()} sigmas for {k} keypoints")
    if n == 0 or m == 0:
        return pred.new_zeros((n, m))
    var = (2 * sig) ** 2  # (K,)
    denom = var * 2 * (areas.to(dtype).reshape(m, 1) + _EPS)  # (M, K)
    vis = gt_vis.reshape(m, k) > 0  # (M, K)
    d2 = ((pred[:, None] - gt[None]) ** 2).sum(-1)  # (N, M, K)
    sim = torch.exp(-d2 / denom)  # (N, M, K)
    count = vis.sum(-1)  # (M,)
    out = (sim * vis).sum(-1) / count.clamp(min=1)  # (N, M)

    blind = count == 0  # (M,) GT without a visible point
    if bool(blind.any()):
        if gt_boxes is None:
            out[:, blind] = 0.0
        else:
            b = gt_boxes.to(dtype).reshape(m, 4)[blind]  # (m0, 4)
            wh = b[:, 2:] - b[:, :2]  # (m0, 2)
            lo, hi = b[:, :2] - wh, b[:, 2:] + wh  # the box grown by its size on each side
            p = pred[:, None]  # (N, 1, K, 2)
            # distance outside the region per axis (0 inside), as pycocotools' two max() terms
            gap = (lo[None, :, None] - p).clamp(min=0) + (p - hi[None, :, None]).clamp(min=0)  # (N, m0, K, 2)
            e = (gap**2).sum(-1) / denom[blind][None]  # (N, m0, K)
            out[:, blind] = torch.exp(-e).mean(-1)
    return out
