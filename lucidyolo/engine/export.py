"""``lucid export``: a checkpoint's deployed graph (trunk + o2o + top-k) to ONNX, optionally checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucidyolo.cli.console import info
from lucidyolo.errors import NotAvailableError, UserError

PARITY_BOX_TOL = 1e-4
"""Largest box difference, normalised by the input side, accepted by ``--check`` (see docs/decisions/model.md)."""


def run_export(
    checkpoint: Path, fmt: str = "onnx", img_size: int | None = None, dynamic_batch: bool = False,
    check: bool = False, output: Path | None = None, ema: bool = True,
) -> dict[str, Any]:
    from lucidyolo.engine.fit import quiet_known_warnings

    quiet_known_warnings()
    if fmt != "onnx":
        raise UserError(f"--format {fmt!r} is not supported.", fix="Use --format onnx.")
    from lucidyolo.engine.restore import restore

    restored = restore(checkpoint, ema=ema)
    if not restored.spec.capabilities.export or restored.spec.name != "det":
        raise NotAvailableError(f"Export for task {restored.spec.name!r} is not built yet.", fix="Nothing was run.")
    size = img_size or restored.config.data.img_size
    out = output or checkpoint.with_suffix(".onnx")
    import torch

    from lucidyolo.export.onnx import export_onnx, onnx_parity
    from lucidyolo.models.deploy import make_deploy_model

    deployed = make_deploy_model(restored.model)
    path = export_onnx(deployed, out, img_size=size, dynamic_batch=dynamic_batch)
    result: dict[str, Any] = {"onnx": str(path), "img_size": size, "dynamic_batch": dynamic_batch}
    info(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {size} px, opset 17)")
    if check:
        gen = torch.Generator().manual_seed(0)
        images = torch.rand(2 if dynamic_batch else 1, 3, size, size, generator=gen)
        parity = onnx_parity(deployed, path, images)
        ok = (
            parity["classes_equal"] and parity["matched"] == parity["rows"]
            and parity["max_box_diff_norm"] <= PARITY_BOX_TOL and parity["sorted_score_diff"] <= 1e-4
        )
        result["parity"] = {**parity, "passed": ok}
        info(
            f"onnxruntime parity: {parity['matched']}/{parity['rows']} rows matched, classes equal "
            f"{parity['classes_equal']}, max box diff {parity['max_box_diff']:.2e} px "
            f"({parity['max_box_diff_norm']:.1e} of the side), max score diff {parity['max_score_diff']:.1e}, "
            f"top-k score profile diff {parity['sorted_score_diff']:.1e}"
        )
        if parity["rows"] == 0:
            info("note: every top-k score is tied within 1e-4 (an untrained model?): only the score profile was compared")
        if not ok:
            raise UserError(
                "onnxruntime does not reproduce PyTorch on this export.",
                why=f"parity check failed: {parity}",
                fix="Report this with the checkpoint; the ONNX file was written but should not be deployed.",
            )
    return result
