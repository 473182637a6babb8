"""``lucid predict``: run a checkpoint on images."""

from __future__ import annotations

from pathlib import Path

import typer


def predict(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`."),
    source: str = typer.Option(..., "--source", help="Image, folder or glob."),
    conf: float = typer.Option(0.25, "--conf", help="Confidence threshold."),
    decoder: str = typer.Option("e2e", "--decoder", help="e2e (one-to-one top-k) or nms."),
    save: Path | None = typer.Option(None, "--save", help="Write annotated images to this folder."),
    output: Path | None = typer.Option(None, "--output", help="Write predictions JSON here."),
) -> None:
    """Run a checkpoint on an image, a folder or a glob."""
    from lucidyolo.errors import NotAvailableError

    raise NotAvailableError(
        "`lucid predict` is not available yet.",
        why="prediction and drawing are not built yet (see the status table in the README).",
        fix="Nothing was run.",
    )
