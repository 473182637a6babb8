"""Instance masks from decoded predictions, COCO RLE, and ground-truth masks from polygon rings.

Predicted masks (:func:`masks_in_original`, :func:`masks_in_input`) are
assembled from a :class:`~lucidyolo.tasks.segment.mask_detections.MaskDetections`
of one image (``rows (K, 6)``, ``coeffs (K, P)``, ``protos (P, Hp, Wp)``):
mask logits ``coeffs @ protos``, bilinear upsampling, crop to the predicted
box, threshold at ``sigmoid > 0.5``, inverse letterbox. Exactly:

* the target pixel ``(v, u)`` (row, column) is sampled at its centre, which
  lies at network-input ``x = (u + 0.5) * scale + pad_x`` (``y`` with
  ``pad_y``; the identity letterbox in the input frame);
* prototype pixel ``j`` covers input ``[s*j, s*(j+1))``, so its centre is the
  prototype coordinate ``j`` and input ``x`` is prototype ``x / s - 0.5``;
* the logit there is bilinear in the four surrounding prototype pixels, the
  coordinate clamped to ``[0, Wp - 1]`` (``[0, Hp - 1]``) at the border
  (``grid_sample(align_corners=False, padding_mode="border")``);
* the pixel is in the mask when that logit is ``> 0`` and its centre lies in
  the row's box, ``x1 <= x < x2`` and ``y1 <= y < y2`` in input pixels
  (half-open, so abutting boxes tile).

Interpolation happens in *logit* space: the logits are linear in the
prototypes, so the ``P`` prototypes are upsampled once per image with two
interpolation matrices (``Rx (w, Wp) @ protos^T @ Ry^T (Hp, h)``) and a row's
logits are one matmul of its coefficients with the upsampled prototypes,
evaluated only inside its box (the crop makes everything outside False, so the
work is the summed box area and the float buffer one box, not ``N x h x w``).
That is far cheaper than upsampling up to 300 sigmoid maps, and it differs from
sigmoid-then-interpolate only at sub-pixel boundary positions (both thresholds
agree wherever the four neighbouring prototype logits agree in sign).

Ground-truth masks (:func:`gt_instance_rles`) are rasterised from the batch's
polygon rings with pycocotools (``frPyObjects`` + ``merge``: an instance is the
union of its rings), the rasterisation COCOeval itself applies to polygons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from pycocotools import mask as mask_utils
from torch import Tensor

from lucidyolo.metrics.coco_eval import dets_to_coco_results
from lucidyolo.tasks.segment.mask_detections import MaskDetections

PROTO_STRIDE = 4.0
"""Network-input pixels per prototype pixel of the YOLO26 prototype net (``S_in / Hp``)."""

Rle = dict[str, Any]
"""A COCO compressed RLE: ``{"size": [h, w], "counts": str | bytes}``."""


def _interp_matrix(coords: np.ndarray, size: int, device: torch.device) -> Tensor:
    """``(n, size)`` float32 bilinear weights sampling a length-``size`` axis at ``coords``.

    ``coords`` are continuous positions with pixel centres at integers; they
    are clamped to ``[0, size - 1]`` (border padding), so every row sums to 1.
    """
    c = np.clip(coords, 0.0, size - 1)  # (n,) float64: exact positions, rounding once at the end
    i0 = np.minimum(np.floor(c).astype(np.int64), size - 1)
    i1 = np.minimum(i0 + 1, size - 1)
    frac = c - i0
    out = np.zeros((c.shape[0], size), dtype=np.float64)
    rows = np.arange(c.shape[0])
    np.add.at(out, (rows, i0), 1.0 - frac)  # add: i0 == i1 at the clamped border
    np.add.at(out, (rows, i1), frac)
    return torch.from_numpy(out).to(device=device, dtype=torch.float32)


def _assemble(det: MaskDetections, ys: np.ndarray, xs: np.ndarray, stride_y: float,
              stride_x: float) -> np.ndarray:
    """Masks of the rows with score > 0 sampled at input-frame centres ``ys (h,)`` x ``xs (w,)``.

    Returns ``(N, h, w)`` bool whose memory is column-major per mask (a
    transposed view of ``(N, w, h)``): pycocotools encodes Fortran-ordered
    masks, so :func:`encode_rle` then needs no copy.
    """
    rows = det.rows.reshape(-1, 6)
    keep = rows[:, 4] > 0
    n, h, w = int(keep.sum()), ys.shape[0], xs.shape[0]
    if n == 0 or h == 0 or w == 0:
        return np.zeros((n, w, h), dtype=bool).transpose(0, 2, 1)
    protos = det.protos
    p, hp, wp = protos.shape
    device = protos.device
    # the crop is an index range per axis: centres are increasing, so "x1 <= x < x2" holds
    # on [first x >= x1, first x >= x2); float64 on the host, so ties are exact
    box = rows[keep, :4].detach().to("cpu", torch.float64).numpy()  # (N, 4)
    u0, u1 = np.searchsorted(xs, box[:, 0]), np.searchsorted(xs, box[:, 2])  # (N,) columns
    v0, v1 = np.searchsorted(ys, box[:, 1]), np.searchsorted(ys, box[:, 3])  # (N,) rows
    with torch.no_grad():
        ry = _interp_matrix(ys / stride_y - 0.5, hp, device)  # (h, Hp)
        rx = _interp_matrix(xs / stride_x - 0.5, wp, device)  # (w, Wp)
        # every prototype upsampled once: (w, Wp) @ (P, Wp, Hp) @ (Hp, h) -> (P, w, h), stored
        # (w, h, P) so a box's slice is contiguous along P for the matmul below
        up = (rx @ protos.float().transpose(1, 2) @ ry.T).permute(1, 2, 0).contiguous()
        coeffs = det.coeffs.reshape(-1, p)[keep].float()  # (N, P)
        # on the CPU, numpy's zeros are lazily zeroed pages (the masks are mostly never written)
        out = (torch.from_numpy(np.zeros((n, w, h), dtype=bool)) if device.type == "cpu"
               else torch.zeros((n, w, h), dtype=torch.bool, device=device))
        # logits only inside each row's box (everything outside is cropped to False):
        # the work is the summed box area, not N * h * w
        for k in np.flatnonzero((u1 > u0) & (v1 > v0)).tolist():
            region = up[u0[k]:u1[k], v0[k]:v1[k]]  # (bw, bh, P)
            out[k, u0[k]:u1[k], v0[k]:v1[k]] = (region @ coeffs[k]) > 0
        masks = out.cpu().numpy()  # no copy on the CPU
    return masks.transpose(0, 2, 1)


def masks_in_original(
    det: MaskDetections,
    letterbox: Sequence[float],
    orig_hw: Sequence[int],
    stride: float = PROTO_STRIDE,
) -> np.ndarray:
    """Masks of one image's rows in original-image pixels.

    Args:
        det: one image: ``rows (K, 6)`` ``[x1, y1, x2, y2, score, class]`` in
            network-input pixels, ``coeffs (K, P)``, ``protos (P, Hp, Wp)``.
        letterbox: ``(scale, pad_x, pad_y)`` with ``x_net = x_orig * scale + pad_x``.
        orig_hw: ``(h, w)`` of the original image.
        stride: network-input pixels per prototype pixel.

    Returns:
        ``(N, h, w)`` bool, one mask per row with ``score > 0`` in row order
        (the rows ``rows[rows[:, 4] > 0]``, the order
        :func:`~lucidyolo.metrics.coco_eval.dets_to_coco_results` emits).
    """
    scale, pad_x, pad_y = (float(v) for v in letterbox)
    h, w = (int(v) for v in orig_hw)
    ys = (np.arange(h, dtype=np.float64) + 0.5) * scale + pad_y  # (h,) input-frame centres
    xs = (np.arange(w, dtype=np.float64) + 0.5) * scale + pad_x  # (w,)
    return _assemble(det, ys, xs, stride, stride)


def masks_in_input(det: MaskDetections, height: int, width: int) -> np.ndarray:
    """Masks of one image's rows in the ``height x width`` network-input frame.

    The prototype stride is ``height / Hp`` (rows) and ``width / Wp`` (columns).

    Returns:
        ``(N, height, width)`` bool, rows with ``score > 0`` in row order.
    """
    _, hp, wp = det.protos.shape
    ys = np.arange(int(height), dtype=np.float64) + 0.5
    xs = np.arange(int(width), dtype=np.float64) + 0.5
    return _assemble(det, ys, xs, height / hp, width / wp)


def encode_rle_bytes(masks: np.ndarray) -> list[Rle]:
    """pycocotools RLEs of ``(N, h, w)`` bool masks, ``counts`` as pycocotools' bytes."""
    masks = np.asarray(masks, dtype=bool)
    if masks.shape[0] == 0:
        return []
    # (h, w, N) Fortran order is what pycocotools reads; masks from _assemble already
    # have that layout, so this is a view, not a copy
    fortran = np.asfortranarray(masks.view(np.uint8).transpose(1, 2, 0))
    return list(mask_utils.encode(fortran))


def encode_rle(masks: np.ndarray) -> list[Rle]:
    """COCO compressed RLE of ``(N, h, w)`` bool masks.

    Returns:
        ``N`` dicts ``{"size": [h, w], "counts": str}`` (JSON-ready; pycocotools
        ``decode``, ``area``, ``iou`` and ``loadRes`` accept them as they are).
    """
    out = encode_rle_bytes(masks)
    for r in out:
        r["counts"] = r["counts"].decode("ascii")
    return out


def mask_results(
    det: MaskDetections,
    image_id: int,
    category_ids: Sequence[int],
    letterbox: Sequence[float],
    orig_hw: Sequence[int],
    stride: float = PROTO_STRIDE,
) -> list[dict[str, Any]]:
    """One image's COCO results with boxes and masks (original pixels, dataset category ids).

    Args:
        det: one image's ``rows (K, 6)``, ``coeffs (K, P)``, ``protos (P, Hp, Wp)``.
        image_id: the ground truth's id of this image.
        category_ids: ``category_ids[label]`` is the dataset's own category id.
        letterbox: ``(scale, pad_x, pad_y)``.
        orig_hw: original ``(h, w)``.
        stride: network-input pixels per prototype pixel.

    Returns:
        :func:`~lucidyolo.metrics.coco_eval.dets_to_coco_results`' dicts
        (``image_id``, ``category_id``, ``bbox``, ``score``) plus
        ``"segmentation"``: RLE with ``counts`` str, one per row with score > 0.
        ``COCO.loadRes`` takes them for ``bbox`` and for ``segm``.
    """
    scale, pad_x, pad_y = (float(v) for v in letterbox)
    h, w = (int(v) for v in orig_hw)
    results = dets_to_coco_results(det.rows, image_id, category_ids, scale, pad_x, pad_y, (h, w))
    rles = encode_rle(masks_in_original(det, letterbox, orig_hw, stride=stride))
    for r, rle in zip(results, rles, strict=True):
        r["segmentation"] = rle
    return results


def empty_rle(height: int, width: int) -> Rle:
    """The RLE of an all-False ``height x width`` mask (``counts`` bytes)."""
    return encode_rle_bytes(np.zeros((1, height, width), dtype=bool))[0]


def _box_polygon(box: Sequence[float]) -> list[float]:
    x1, y1, x2, y2 = (float(v) for v in box)
    return [x1, y1, x2, y1, x2, y2, x1, y2]


def gt_instance_rles(gt: Mapping[str, Tensor], height: int, width: int) -> list[list[Rle]]:
    """RLE masks of a padded batch's ground truth in the ``height x width`` input frame.

    Args:
        gt: ``mask (B, M)`` bool, ``boxes (B, M, 4)`` xyxy, optional
            ``crowd (B, M)`` bool, and the polygon rings ``poly_points (Q, 2)``
            ``x, y`` input pixels, ``poly_ring_lengths (R,)`` (rings
            consecutive in ``poly_points``), ``poly_ring_image (R,)`` and
            ``poly_ring_slot (R,)`` (the ring's instance on the M axis).
        height: input height.
        width: input width.

    Returns:
        For each image, one RLE (``counts`` bytes) per real GT slot in slot
        order (the order of ``gt["mask"][b].nonzero()``): the union of the
        instance's rings; a crowd slot gets its box as a box-shaped polygon;
        an instance without rings (or with only degenerate rings of fewer than
        3 points, which have no area) gets an empty mask.
    """
    valid = gt["mask"].bool().cpu().numpy()  # (B, M)
    crowd_t = gt.get("crowd")
    crowd = np.zeros_like(valid) if crowd_t is None else crowd_t.bool().cpu().numpy()
    boxes = gt["boxes"].detach().to("cpu", torch.float64).numpy()  # (B, M, 4)
    points = gt["poly_points"].detach().to("cpu", torch.float64).numpy().reshape(-1, 2)  # (Q, 2)
    lengths = gt["poly_ring_lengths"].cpu().numpy().astype(np.int64).reshape(-1)  # (R,)
    ring_image = gt["poly_ring_image"].cpu().numpy().astype(np.int64).reshape(-1)
    ring_slot = gt["poly_ring_slot"].cpu().numpy().astype(np.int64).reshape(-1)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    # fewer than 3 points has no area; pycocotools would also read a 2-point ring
    # (4 numbers) as a bbox
    usable = lengths >= 3
    empty = empty_rle(height, width)
    out: list[list[Rle]] = []
    for b in range(valid.shape[0]):
        rings = np.flatnonzero((ring_image == b) & usable)
        by_slot: dict[int, list[Rle]] = {}
        if rings.size:
            polys = [points[offsets[r]:offsets[r + 1]].reshape(-1).tolist() for r in rings]
            for r, rle in zip(rings, mask_utils.frPyObjects(polys, height, width), strict=True):
                by_slot.setdefault(int(ring_slot[r]), []).append(rle)
        image_rles: list[Rle] = []
        for m in np.flatnonzero(valid[b]):
            if crowd[b, m]:
                image_rles.append(mask_utils.frPyObjects([_box_polygon(boxes[b, m])], height, width)[0])
            elif int(m) in by_slot:
                parts = by_slot[int(m)]
                image_rles.append(parts[0] if len(parts) == 1 else mask_utils.merge(parts, intersect=False))
            else:
                image_rles.append(dict(empty))
        out.append(image_rles)
    return out
