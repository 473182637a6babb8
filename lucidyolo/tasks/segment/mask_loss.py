"""Instance-segmentation training terms: the per-positive mask loss and the semantic auxiliary.

Ground truth comes as ragged polygon rings in the padded batch ``targets``:
``boxes (B, M, 4)`` xyxy network-input px, ``labels (B, M)``, ``mask (B, M)`` (real,
non-crowd GT rows), ``poly_points (P, 2)`` px, ``poly_ring_lengths (R,)``,
``poly_ring_image (R,)`` and ``poly_ring_slot (R,)`` (the ``[b, m]`` owner of each
ring). An instance's mask is the union of its rings, each filled by the even-odd
rule (:func:`~lucidyolo.structures.rasterize.rasterize_rings`). No dense
full-image mask is ever built.

:class:`MaskTerm` (a branch term, ``mask``)
    Reads ``branch["coeffs"] (B, A, P)`` and ``branch["protos"] (B, P, Hp, Wp)``
    (the criterion adds the top-level prototypes to both branch dicts:
    ``DetectionCriterion(branch_inputs=("protos",))``). Prototype pixel ``(i, j)``
    covers input pixels ``[s j, s (j + 1)) x [s i, s (i + 1))`` with
    ``s = proto_stride`` (4).

    For every positive anchor ``a`` of image ``b`` (``fg_mask``) with GT ``g``
    (``gt_index``), let ``box_g`` be the GT box with its sides floored at 1 px
    (``x2 = x1 + max(x2 - x1, 1)``, same for y) and ``q_ij = (x1, y1) +
    ((j + 0.5) w, (i + 0.5) h) / S`` its ``S x S`` bin centres (``S = crop``). The
    predicted mask logits are ``z_ij = c_a . P_b(q_ij)`` with ``P_b`` the prototypes
    bilinearly interpolated at ``q_ij``, computed as ``roi_align(protos, box_g,
    S, spatial_scale=1/s, sampling_ratio=1, aligned=True)`` once per GT (``roi_align``
    is linear in its input, so ``roi(c . P) = c . roi(P)``); the target ``t_ij`` is
    the GT mask at the same points ``q_ij`` (``rasterize_rings`` with origin
    ``(x1, y1)`` and step ``(w, h) / S``). Then::

        loss_a = mean_ij BCEWithLogits(z_ij, t_ij)    (~ BCE summed over the box / box area)
        mask   = sum_a loss_a / max(num positives, 1)   (positives of the global batch)

    Vectorised over instances: positives are grouped by GT (sorted by the flat
    GT id ``b * M + g``, ranked within their group) into a padded ``(G, K, P)``
    coefficient tensor, ``G`` = GTs with a positive, ``K`` = most positives of one
    GT, and one ``bmm`` with the ``(G, P, S * S)`` ROI prototypes gives every
    positive's crop. Memory ``O(G * P * S^2 + G * K * S^2)`` (plus the rasteriser's
    ``O(E * S + R * S^2)`` for the rings of those GTs), independent of the image
    size. Shapes are data-dependent (``nonzero``, ``unique``), so this term syncs
    with the device once per call.

:class:`SemanticTerm` (a global term, ``semantic``)
    Reads ``outputs["semantic"] (B, C, Hs, Ws)`` logits of stride ``stride`` (8). The
    target ``(B, C, Hs, Ws)`` is the per-class union of the instance masks sampled at
    the cell centres ``((j + 0.5) stride, (i + 0.5) stride)``. With ``p = sigmoid``::

        semantic = BCEWithLogits(logits, target).mean()
                   + mean_{b,c} [1 - (2 sum(p t) + 1) / (sum(p) + sum(t) + 1)]

Rings whose instance is not a real GT (``mask`` False: padding, or ``crowd``
when the targets carry it) are dropped by both terms.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.ops import roi_align

from lucidyolo.assign.assignment import Assignment
from lucidyolo.losses.normaliser import global_normaliser
from lucidyolo.structures.rasterize import rasterize_rings

POLYGON_KEYS = ("poly_points", "poly_ring_lengths", "poly_ring_image", "poly_ring_slot")


def floor_box_sides(boxes: Tensor, min_side: float = 1.0) -> Tensor:
    """``(N, 4)`` xyxy with ``x2 = x1 + max(x2 - x1, min_side)`` (and y): a box never has zero area."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack([x1, y1, x1 + (x2 - x1).clamp(min=min_side), y1 + (y2 - y1).clamp(min=min_side)], -1)


def roi_protos(protos: Tensor, image: Tensor, boxes: Tensor, crop: int, proto_stride: float) -> Tensor:
    """Prototypes bilinearly sampled at the ``crop x crop`` bin centres of each box.

    Args:
        protos: ``(B, P, Hp, Wp)``.
        image: ``(G,)`` long image of each box.
        boxes: ``(G, 4)`` xyxy input px (sides > 0).
        crop: ``S``.
        proto_stride: input px per prototype pixel.

    Returns:
        ``(G, P, S, S)``: entry ``(g, :, i, j)`` is the prototype vector at input point
        ``(x1, y1) + ((j + 0.5) w, (i + 0.5) h) / S`` of box ``g``.
    """
    rois = torch.cat([image.to(protos.dtype)[:, None], boxes.to(protos.dtype)], 1)  # (G, 5)
    # aligned=True shifts by half a pixel so prototype pixel k's value sits at its
    # centre, input px s (k + 0.5); sampling_ratio=1 takes exactly the bin centre.
    return roi_align(protos, rois, output_size=crop, spatial_scale=1.0 / proto_stride, sampling_ratio=1, aligned=True)


def roi_masks(
    targets: Mapping[str, Tensor], gt_flat: Tensor, boxes: Tensor, crop: int
) -> Tensor:
    """GT masks sampled at the ``crop x crop`` bin centres of the given boxes.

    Args:
        targets: padded GT with the polygon keys and ``boxes (B, M, 4)``.
        gt_flat: ``(G,)`` distinct flat GT ids ``b * M + m``.
        boxes: ``(G, 4)`` xyxy px (sides > 0), the frame of each GT's crop.
        crop: ``S``.

    Returns:
        ``(G, S, S)`` bool, the union of the rings of GT ``gt_flat[g]`` at the points
        :func:`roi_protos` samples.
    """
    _check_polygons(targets)
    num_slots = targets["boxes"].shape[0] * targets["boxes"].shape[1]
    m = targets["boxes"].shape[1]
    device = boxes.device
    group_of_slot = torch.full((num_slots,), -1, dtype=torch.long, device=device)
    group_of_slot[gt_flat] = torch.arange(gt_flat.shape[0], device=device)
    ring_flat = targets["poly_ring_image"].long() * m + targets["poly_ring_slot"].long()
    ring_group = group_of_slot[ring_flat]  # -1: the ring's GT has no positive
    points, lengths, ring_group = _select_rings(targets, ring_group >= 0, ring_group)
    size = boxes[:, 2:] - boxes[:, :2]
    return rasterize_rings(
        points, lengths, ring_group, gt_flat.shape[0],
        origin=boxes[ring_group, :2], step=(size / crop)[ring_group], height=crop, width=crop,
    )


def _select_rings(
    targets: Mapping[str, Tensor], keep: Tensor, ring_value: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Points, lengths and ``ring_value`` of the rings where ``keep`` (its points follow its ring)."""
    points, lengths = targets["poly_points"], targets["poly_ring_lengths"].long()
    keep_point = torch.repeat_interleave(keep, lengths, output_size=points.shape[0])
    return points[keep_point], lengths[keep], ring_value[keep]


def _check_polygons(targets: Mapping[str, Tensor]) -> None:
    missing = [k for k in POLYGON_KEYS if k not in targets]
    if missing:
        raise KeyError(f"segmentation terms need the polygons field in targets; missing {missing}")


def _real_gt(targets: Mapping[str, Tensor]) -> Tensor:
    """``(B, M)`` bool rows that are real instances (not padding, not crowd)."""
    real = targets["mask"].bool()
    if "crowd" in targets:
        real = real & ~targets["crowd"].bool()
    return real


class MaskTerm(nn.Module):
    """Per-positive prototype-mask BCE over the GT box (branch term ``mask``; see the module doc).

    Args:
        mask_gain: gain of ``mask``.
        crop: ``S``, samples per side of each GT box crop.
        proto_stride: input px per prototype pixel (``H_in / Hp``, 4 for YOLO26).
    """

    def __init__(self, mask_gain: float = 2.5, crop: int = 32, proto_stride: float = 4) -> None:
        super().__init__()
        self.gains = {"mask": mask_gain}
        self.crop = int(crop)
        self.proto_stride = float(proto_stride)

    def extra_repr(self) -> str:
        return f"mask_gain={self.gains['mask']}, crop={self.crop}, proto_stride={self.proto_stride}"

    def forward(
        self,
        branch: Mapping[str, Tensor],
        assignment: Assignment,
        anchors: Tensor,
        strides: Tensor,
        targets: Mapping[str, Tensor],
    ) -> dict[str, Tensor]:
        """``{"mask": 0-d float32}`` before the gain; ``branch`` holds ``coeffs`` and ``protos``."""
        coeffs, protos = branch["coeffs"], branch["protos"]
        # Outside autocast: a loss in fp16 loses the small BCE values of good crops.
        with torch.autocast(device_type=coeffs.device.type, enabled=False):
            return {"mask": self._loss(coeffs.float(), protos.float(), assignment, targets)}

    def _loss(
        self, coeffs: Tensor, protos: Tensor, assignment: Assignment, targets: Mapping[str, Tensor]
    ) -> Tensor:
        b_idx, a_idx = assignment.fg_mask.nonzero(as_tuple=True)  # (N,) each
        num_pos = b_idx.shape[0]
        # before the early return: the normaliser is a collective every process calls once per batch
        norm = global_normaliser(assignment.fg_mask.sum())
        if num_pos == 0:
            return coeffs.sum() * 0.0 + protos.sum() * 0.0  # zero, with a grad path
        m = targets["boxes"].shape[1]
        flat = b_idx * m + assignment.gt_index[b_idx, a_idx].long()  # (N,) flat GT id

        # Group positives by GT: group id (sorted GT order), rank inside the group.
        gt_flat, group, counts = torch.unique(flat, sorted=True, return_inverse=True, return_counts=True)
        num_gt = gt_flat.shape[0]
        order = torch.argsort(group, stable=True)
        group_sorted = group[order]
        first = torch.cumsum(counts, 0) - counts  # (G,) position of each group's first positive
        rank = torch.arange(num_pos, device=flat.device) - first[group_sorted]
        k = int(counts.max())
        padded = coeffs.new_zeros((num_gt, k, coeffs.shape[-1]))  # (G, K, P)
        padded[group_sorted, rank] = coeffs[b_idx[order], a_idx[order]]
        valid = torch.zeros((num_gt, k), dtype=torch.bool, device=flat.device)
        valid[group_sorted, rank] = True

        boxes = floor_box_sides(targets["boxes"].reshape(-1, 4)[gt_flat].float())  # (G, 4)
        rois = roi_protos(protos, gt_flat // m, boxes, self.crop, self.proto_stride)  # (G, P, S, S)
        logits = torch.bmm(padded, rois.flatten(2))  # (G, K, S*S)
        target = roi_masks(targets, gt_flat, boxes, self.crop).flatten(1).float()  # (G, S*S)
        bce = F.binary_cross_entropy_with_logits(
            logits, target[:, None].expand_as(logits), reduction="none"
        ).mean(-1)  # (G, K) per positive
        return (bce * valid).sum() / norm


class SemanticTerm(nn.Module):
    """BCE + soft Dice of the semantic auxiliary head against the per-class union of masks (global term ``semantic``).

    Args:
        semantic_gain: gain of ``semantic``.
        stride: input px per semantic-map pixel (``H_in / Hs``, 8 for YOLO26).
    """

    def __init__(self, semantic_gain: float = 0.5, stride: float = 8) -> None:
        super().__init__()
        self.gains = {"semantic": semantic_gain}
        self.stride = float(stride)

    def extra_repr(self) -> str:
        return f"semantic_gain={self.gains['semantic']}, stride={self.stride}"

    def target(self, targets: Mapping[str, Tensor], shape: tuple[int, int, int, int]) -> Tensor:
        """``(B, C, Hs, Ws)`` bool per-class union of the real instances' masks at the cell centres."""
        batch, num_classes, height, width = shape
        _check_polygons(targets)
        image, slot = targets["poly_ring_image"].long(), targets["poly_ring_slot"].long()
        keep = _real_gt(targets)[image, slot]
        ring_target = image * num_classes + targets["labels"].long()[image, slot]
        points, lengths, ring_target = _select_rings(targets, keep, ring_target)
        rings = lengths.shape[0]
        origin = points.new_zeros((rings, 2))
        step = points.new_full((rings, 2), self.stride)
        mask = rasterize_rings(points, lengths, ring_target, batch * num_classes, origin, step, height, width)
        return mask.view(batch, num_classes, height, width)

    def forward(self, outputs: Mapping[str, Tensor], targets: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """``{"semantic": 0-d float32}`` before the gain."""
        logits = outputs["semantic"]
        with torch.autocast(device_type=logits.device.type, enabled=False):
            logits = logits.float()
            target = self.target(targets, tuple(logits.shape)).float()
            bce = F.binary_cross_entropy_with_logits(logits, target)
            p = logits.sigmoid()
            inter = (p * target).sum((2, 3))
            dice = 1.0 - (2.0 * inter + 1.0) / (p.sum((2, 3)) + target.sum((2, 3)) + 1.0)  # (B, C)
            return {"semantic": bce + dice.mean()}
