"""``lucid export``: a checkpoint's deployed graph (trunk + o2o + top-k) to ONNX, optionally checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucidyolo.errors import NotAvailableError, UserError


def run_export(
    checkpoint: Path, fmt: str = "onnx", img_size: int | None = None, dynamic_batch: bool = False,
    check: bool = False, output: Path | None = None, ema: bool = True,
) -> dict[str, Any]:
    """Write the deployed graph with the task's named outputs; ``check`` runs the task's onnxruntime parity.

    Returns ``{"onnx", "img_size", "dynamic_batch", "outputs", "bytes"}`` plus ``parity`` when checked.
    """
    from lucidyolo.engine.fit import quiet_known_warnings

    quiet_known_warnings()
    if fmt != "onnx":
        raise UserError(f"--format {fmt!r} is not supported.", fix="Use --format onnx.")
    from lucidyolo.engine.restore import restore

    restored = restore(checkpoint, ema=ema)
    spec = restored.spec
    if not spec.capabilities.export or spec.export is None:
        raise NotAvailableError(
            f"Export for task {spec.name!r} is not available: its plugin declares no export outputs.",
            fix="Nothing was run.",
        )
    if check and spec.export.check is None:
        raise NotAvailableError(
            f"`--check` for task {spec.name!r} is not available: its plugin provides no parity check.",
            fix="Export without --check.",
        )
    size = img_size or restored.config.data.img_size
    out = output or checkpoint.with_suffix(".onnx")
    import torch

    from lucidyolo.export.onnx import export_onnx

    deployed = spec.export.deploy(model=restored.model).eval()
    path = export_onnx(deployed, out, img_size=size, dynamic_batch=dynamic_batch, output_names=spec.export.outputs)
    result: dict[str, Any] = {
        "onnx": str(path), "img_size": size, "dynamic_batch": dynamic_batch, "outputs": list(spec.export.outputs),
        "bytes": path.stat().st_size,
    }
    if check:
        assert spec.export.check is not None
        gen = torch.Generator().manual_seed(0)
        images = torch.rand(2 if dynamic_batch else 1, 3, size, size, generator=gen)
        parity = spec.export.check(deployed=deployed, onnx_path=path, images=images)
        result["parity"] = parity
        if not parity["passed"]:
            raise UserError(
                "onnxruntime does not reproduce PyTorch on this export.",
                why=f"parity check failed: {parity.get('summary', parity)}",
                fix="Report this with the checkpoint; the ONNX file was written but should not be deployed.",
            )
    return result
