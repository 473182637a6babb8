"""ONNX export of the deployed graph (trunk + o2o + top-k decode) and an onnxruntime parity check.

Uses the TorchScript exporter (``dynamo=False``): the dynamo exporter in
torch >= 2.9 needs ``onnxscript``, which is not a dependency. Anchors and
strides are baked in as constants for the export size; the graph has a
``TopK`` node and no ``NonMaxSuppression``.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import ConfigError
from lucidyolo.export.formats import INPUT_NAME, run_exported, run_onnx  # noqa: F401 - run_onnx: its old home
from lucidyolo.models.deploy import DeployModel, make_deploy_model
from lucidyolo.models.yolo26 import YOLO26

OUTPUT_NAME = "detections"

PARITY_BOX_TOL = 1e-4
"""Largest box difference, normalised by the input side, accepted by ``--check`` (see docs/decisions/model.md)."""


def _size(img_size: int | tuple[int, int]) -> tuple[int, int]:
    h, w = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
    if h <= 0 or w <= 0 or h % 32 or w % 32:
        raise ConfigError(
            f"Export size {img_size!r} is not a positive multiple of 32.",
            why="the network downsamples by 32 and anchors are baked for one grid.",
            fix="use e.g. 320, 640 or 1024.",
        )
    return h, w


def export_onnx(
    model: YOLO26 | DeployModel,
    path: str | Path,
    img_size: int | tuple[int, int] = 640,
    opset: int = 17,
    dynamic_batch: bool = False,
    output_names: Sequence[str] = (OUTPUT_NAME,),
) -> Path:
    """Export the deployed graph to ONNX.

    Input ``images`` float ``(B, 3, H, W)`` in ``[0, 1]``; outputs named by
    ``output_names`` in the order the deployed module returns them (detection:
    ``detections (B, k, 6)`` rows ``[x1, y1, x2, y2, score, class]`` in input
    pixels).

    Args:
        model: a full YOLO26 (its deploy view is built here) or a ``DeployModel``.
        path: destination ``.onnx`` file (parent folders are created).
        img_size: export size ``S`` or ``(H, W)``, multiples of 32.
        opset: ONNX opset (>= 17).
        dynamic_batch: make the batch dimension symbolic.
        output_names: the task's named outputs (``ExportSpec.outputs``).

    Returns:
        The written path.
    """
    if opset < 17:
        raise ConfigError(f"ONNX opset {opset} is too old.", fix="use opset 17 or newer.")
    h, w = _size(img_size)
    deployed = make_deploy_model(model) if isinstance(model, YOLO26) else model
    deployed = deployed.eval()
    if hasattr(deployed, "bake_anchors"):  # anchor grids become constants of the export size
        deployed.bake_anchors(h, w)
    ref = next(deployed.parameters())
    dummy = torch.zeros(1, 3, h, w, dtype=ref.dtype, device=ref.device)
    path = Path(path)
    names = list(output_names)
    axes = {INPUT_NAME: {0: "batch"}, **{n: {0: "batch"} for n in names}} if dynamic_batch else None
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about shape-derived Python ints are expected
        # into memory, then one atomic write: an interrupted or refused write never leaves a partial .onnx
        buffer = io.BytesIO()
        torch.onnx.export(
            deployed,
            (dummy,),
            buffer,
            input_names=[INPUT_NAME],
            output_names=names,
            opset_version=opset,
            dynamic_axes=axes,
            do_constant_folding=True,
            dynamo=False,
        )
    with atomic_open(path, "wb") as f:
        f.write(buffer.getbuffer())
    return path


def onnx_parity(
    deployed: nn.Module, path: str | Path, images: Tensor, min_score: float = 1e-3, score_tol: float = 1e-4
) -> dict:
    """Run the exported file and compare with PyTorch on the same input.

    ``path`` is any file :func:`~lucidyolo.export.formats.run_exported` runs (ONNX through
    onnxruntime, TorchScript, OpenVINO IR): the comparison is the same for every format.

    Each PyTorch row with score ``>= min_score`` is paired with the onnxruntime
    row of the same image whose score is within ``score_tol`` and whose box is
    closest: anchors with nearly equal scores may legitimately swap places
    between two runtimes, so rows are matched instead of compared by position.

    Args:
        deployed: the PyTorch deployed model that was exported.
        path: the ``.onnx`` file.
        images: ``(B, 3, H, W)`` input at the export size.
        min_score: PyTorch rows with a lower score are not compared.
        score_tol: largest score difference for two rows to be a candidate pair.

    Returns:
        ``{"rows": compared rows, "matched": rows with a candidate, "classes_equal": bool,
        "max_box_diff": px, "max_box_diff_norm": px / max(H, W), "max_score_diff": float, "in_place": rows equal at the same position}``.
    """
    with torch.no_grad():
        expected = deployed(images).float().cpu()  # (B, k, D + 2)
    return compare_detections(expected, run_exported(path, images)[0], images, min_score, score_tol)


def detections_pass(parity: dict) -> bool:
    """The acceptance rule of ``--check`` on :func:`onnx_parity`'s detection-row comparison."""
    return bool(
        parity["classes_equal"] and parity["matched"] == parity["rows"]
        and parity["max_box_diff_norm"] <= PARITY_BOX_TOL and parity["sorted_score_diff"] <= 1e-4
    )


def compare_detections(
    expected: Tensor, got: Tensor, images: Tensor, min_score: float = 1e-3, score_tol: float = 1e-4
) -> dict:
    """:func:`onnx_parity`'s comparison of PyTorch rows ``expected`` with onnxruntime rows ``got``.

    Both are ``(B, k, D + 2)`` ``[*box, score, class]``: ``D = 4`` xyxy, or ``D = 5``
    rotated ``[cx, cy, w, h, theta]`` (theta compared like a coordinate: a gap in
    radians is far below a pixel's share of the side).
    """
    d = expected.shape[-1] - 2
    # Rows scored within score_tol of the last kept row sit on the top-k boundary: which of those
    # near-tied anchors make the cut legitimately differs between runtimes, so they are not compared.
    boundary = expected[..., -1:, d] + score_tol  # (B, 1); 0 + tol when the output has padding
    keep = (expected[..., d] >= min_score) & (expected[..., d] > boundary)  # (B, k)
    # Pairwise over rows of the same image: (B, k_expected, k_got).
    score_gap = (expected[..., None, d] - got[:, None, :, d]).abs()
    box_gap = (expected[:, :, None, :d] - got[:, None, :, :d]).abs().amax(dim=-1)
    box_gap = box_gap.masked_fill(score_gap > score_tol, float("inf"))
    best_gap, best = box_gap.min(dim=-1)  # (B, k_expected)
    paired = got.gather(1, best.unsqueeze(-1).expand(-1, -1, d + 2))  # (B, k, D + 2)
    matched = keep & best_gap.isfinite()
    in_place = keep & ((expected - got).abs().amax(dim=-1) <= 1e-4)
    e, g = expected[matched], paired[matched]  # (R, D + 2)
    return {
        "rows": int(keep.sum()),
        "matched": int(matched.sum()),
        "classes_equal": bool(torch.equal(e[:, d + 1], g[:, d + 1])),
        "max_box_diff": float((e[:, :d] - g[:, :d]).abs().max()) if len(e) else 0.0,
        # float32 noise of a deep net is ~1e-5 relative, i.e. ~1e-3 px at 320 px, so the
        # 1e-4 acceptance bound applies to coordinates normalised by the input size.
        "max_box_diff_norm": float((e[:, :d] - g[:, :d]).abs().max()) / max(images.shape[2:]) if len(e) else 0.0,
        "max_score_diff": float((e[:, d] - g[:, d]).abs().max()) if len(e) else 0.0,
        "in_place": int(in_place.sum()),
        # the score profile of the whole top-k must agree even where rows are too tied to pair
        "sorted_score_diff": float(
            (expected[..., d].sort(dim=-1).values - got[..., d].sort(dim=-1).values).abs().max()
        ),
    }
