"""``lucid export``: the deployed end-to-end graph to ONNX."""

from __future__ import annotations

from pathlib import Path

import typer


def export(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`."),
    fmt: str = typer.Option("onnx", "--format", help="Export format (onnx)."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's)."),
    dynamic_batch: bool = typer.Option(False, "--dynamic-batch", help="Export a dynamic batch axis."),
    check: bool = typer.Option(False, "--check", help="Compare onnxruntime with PyTorch on one input."),
    output: Path | None = typer.Option(None, "--output", help="Output file (default beside the checkpoint)."),
    ema: bool = typer.Option(True, "--ema/--no-ema", help="Export the EMA weights (default) or the raw ones."),
) -> None:
    """Export the deployed graph (trunk + one-to-one head + top-k, no NMS) to ONNX."""
    from lucidyolo.cli.console import info
    from lucidyolo.engine.export import run_export

    result = run_export(checkpoint, fmt, img_size, dynamic_batch, check, output, ema)
    info(f"wrote {result['onnx']} ({result['bytes'] / 1e6:.1f} MB, {result['img_size']} px, opset 17, "
         f"outputs {', '.join(result['outputs'])})")
    if "parity" in result:
        info(f"onnxruntime parity: {result['parity']['summary']}")
