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
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default 640; obb 1024)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Batch size (default 32; obb 8)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
    limit: int | None = typer.Option(None, "--limit", help="Score only the first N images."),
    output: Path | None = typer.Option(None, "--output", help="Write the report JSON here."),
    save_json: Path | None = typer.Option(
        None, "--save-json", help="Write the COCO results file (e2e path; *_nms.json beside it)."
    ),
    task: str | None = typer.Option(None, "--task", help="Must match the checkpoint's task if given."),
) -> None:
    """Score a checkpoint with its task's protocol (pycocotools for det), both decode paths."""
    from lucidyolo.engine.evaluate import run_eval

    run_eval(
        checkpoint=checkpoint, data_root=data_root, split=split, ema=ema, masks=masks, img_size=img_size,
        batch_size=batch_size, device=device, limit=limit, output=output, save_json=save_json, task=task,
    )
