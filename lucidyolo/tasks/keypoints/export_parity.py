"""The keypoint export's parity check: detection rows and the points of the rows both runtimes agree on."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from lucidyolo.export.formats import run_exported
from lucidyolo.export.onnx import PARITY_BOX_TOL, compare_detections, detections_pass


def keypoint_parity(deployed: nn.Module, path: str | Path, images: Tensor) -> dict:
    """Parity of a ``(detections, keypoints)`` export: the detection rows as :func:`onnx_parity`
    compares them, and the points ``(B, k, K, 3)`` of the rows that sit at the same position in
    both runtimes (coordinates normalised by the input size, confidences absolute).

    Returns:
        :func:`onnx_parity`'s dict plus ``keypoint_rows``, ``max_point_diff_norm``,
        ``max_point_conf_diff``, ``passed`` and ``summary``.
    """
    got = run_exported(path, images)
    with torch.no_grad():
        expected = [t.float().cpu() for t in deployed(images)]
    parity = compare_detections(expected[0], got[0], images)
    same = ((expected[0] - got[0]).abs().amax(-1) <= 1e-4) & (expected[0][..., 4] >= 1e-3)  # (B, k)
    e, g = expected[1][same], got[1][same]  # (R, K, 3)
    point = float((e[..., :2] - g[..., :2]).abs().max()) / max(images.shape[2:]) if len(e) else 0.0
    conf = float((e[..., 2] - g[..., 2]).abs().max()) if len(e) else 0.0
    ok = detections_pass(parity) and point <= PARITY_BOX_TOL and conf <= 1e-4
    summary = (
        f"{parity['matched']}/{parity['rows']} rows matched, classes equal {parity['classes_equal']}, max box diff "
        f"{parity['max_box_diff']:.2e} px, {int(same.sum())} rows' points compared: max point diff {point:.1e} of the "
        f"side, max confidence diff {conf:.1e}"
    )
    return {**parity, "keypoint_rows": int(same.sum()), "max_point_diff_norm": point, "max_point_conf_diff": conf,
            "passed": bool(ok), "summary": summary}
