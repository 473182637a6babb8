"""The segmentation export's parity check: detection rows, prototypes and the masks assembled from both runtimes."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from lucidyolo.export.formats import run_exported
from lucidyolo.export.onnx import compare_detections, detections_pass

MASK_PARITY_IOU = 0.99
"""Smallest mask IoU between onnxruntime and PyTorch accepted for a compared row."""


def mask_parity(deployed: nn.Module, path: str | Path, images: Tensor) -> dict:
    """Parity of a ``(detections, coeffs, protos)`` export: the detection rows as :func:`onnx_parity`
    compares them, the prototypes elementwise, and the masks assembled from both runtimes' outputs
    for the rows that sit at the same position in both (mask IoU per row).

    Returns:
        :func:`onnx_parity`'s dict plus ``max_proto_diff``, ``mask_rows``, ``min_mask_iou``,
        ``passed`` and ``summary``.
    """
    from lucidyolo.tasks.segment.mask_assembly import masks_in_input
    from lucidyolo.tasks.segment.mask_detections import MaskDetections

    got = run_exported(path, images)
    with torch.no_grad():
        expected = [t.float().cpu() for t in deployed(images)]
    parity = compare_detections(expected[0], got[0], images)
    max_proto = float((expected[2] - got[2]).abs().max())
    h, w = images.shape[2:]
    ious: list[float] = []
    for i in range(images.shape[0]):
        same = ((expected[0][i] - got[0][i]).abs().amax(-1) <= 1e-4) & (expected[0][i][:, 4] >= 1e-3)  # (k,)
        if not bool(same.any()):
            continue
        a = masks_in_input(MaskDetections(expected[0][i][same], expected[1][i][same], expected[2][i]), h, w)
        b = masks_in_input(MaskDetections(got[0][i][same], got[1][i][same], got[2][i]), h, w)
        inter = (a & b).reshape(a.shape[0], -1).sum(1)
        union = (a | b).reshape(a.shape[0], -1).sum(1)
        ious += [1.0 if u == 0 else float(n) / float(u) for n, u in zip(inter, union, strict=True)]
    min_iou = min(ious) if ious else 1.0
    boxes_ok = detections_pass(parity)
    scale = float(expected[2].abs().max()) + 1.0
    ok = boxes_ok and max_proto <= 1e-4 * scale and min_iou >= MASK_PARITY_IOU
    summary = (
        f"{parity['matched']}/{parity['rows']} rows matched, classes equal {parity['classes_equal']}, max box diff "
        f"{parity['max_box_diff']:.2e} px, max prototype diff {max_proto:.1e}, {len(ious)} masks compared, "
        f"min mask IoU {min_iou:.4f}"
    )
    return {**parity, "max_proto_diff": max_proto, "mask_rows": len(ious), "min_mask_iou": min_iou,
            "passed": bool(ok), "summary": summary}


