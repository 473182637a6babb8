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
) -> None:
    """Export the deployed graph (trunk + one-to-one head + top-k) to ONNX."""
    from lucidyolo.errors import NotAvailableError

    raise NotAvailableError(
        "`lucid export` is not available yet.",
        why="exporting a trained checkpoint needs the training engine (see the status table in the README).",
        fix="Nothing was run.",
    )
