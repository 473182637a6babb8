"""``lucid eval``: score a checkpoint with its task's standard protocol."""

from __future__ import annotations

from pathlib import Path

import typer


def evaluate(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`."),
    data_root: Path | None = typer.Option(None, "--data-root", help="Dataset root (default: the run's)."),
    split: str = typer.Option("val", "--split", help="Split to score."),
    ema: bool = typer.Option(True, "--ema/--no-ema", help="Score the EMA weights (default) or the raw ones."),
    masks: bool = typer.Option(True, "--masks/--no-masks", help="seg: also score masks."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default per task)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Batch size (default per task)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
    limit: int | None = typer.Option(None, "--limit", help="Score only the first N images."),
    output: Path | None = typer.Option(None, "--output", help="Write the report JSON here."),
    save_json: Path | None = typer.Option(None, "--save-json", help="Write the COCO results file here."),
    task: str | None = typer.Option(None, "--task", help="Must match the checkpoint's task if given."),
) -> None:
    """Score a checkpoint with its task's protocol (pycocotools for det/seg)."""
    from lucidyolo.errors import NotAvailableError

    raise NotAvailableError(
        "`lucid eval` is not available yet.",
        why="evaluation lands with the detection engine (see the status table in the README).",
        fix="Nothing was run.",
    )
