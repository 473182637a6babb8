"""``lucid eval``: score a checkpoint with its task's standard protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def evaluate(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`, or its run folder (best.ckpt, else last.ckpt)."),
    data_root: Path | None = typer.Option(None, "--data-root", help="Dataset root (default: the run's)."),
    split: str = typer.Option("val", "--split", help="Split to score."),
    ema: bool = typer.Option(True, "--ema/--no-ema", help="Score the EMA weights (default) or the raw ones."),
    masks: str = typer.Option(
        "true", "--masks", metavar="true|false", help="Tasks with masks: also score them (false: boxes only)."
    ),
    no_masks: bool = typer.Option(False, "--no-masks", help="The same as --masks false."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's training size, its data.img_size)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Batch size (default: the task's, 32 for det)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
    limit: int | None = typer.Option(None, "--limit", help="Score only the first N images."),
    output: Path | None = typer.Option(None, "--output", help="Write the report JSON here."),
    save_json: Path | None = typer.Option(
        None, "--save-json", help="Write the results file (e2e path; *_nms.json beside it)."
    ),
    task: str | None = typer.Option(None, "--task", help="Must match the checkpoint's task if given."),
    fold: bool = typer.Option(
        True, "--fold/--no-fold",
        help="Fold BatchNorm into the convolutions (faster); --no-fold scores the graph exactly as training validated it.",
    ),
    plots: Path | None = typer.Option(
        None, "--plots", help="Write PR / F1 / P / R curves and confusion matrices (PNG + JSON) into this folder.",
    ),
    coco_backend: str = typer.Option(
        "auto", "--coco-backend", metavar="auto|pycocotools|faster_coco_eval",
        help="Library that scores COCO results (same protocol; auto: faster_coco_eval when installed).",
    ),
) -> None:
    """Score a checkpoint with its task's protocol (pycocotools for det), both decode paths."""
    from lucidyolo.engine.evaluate import run_eval
    from lucidyolo.errors import UserError

    flag = masks.strip().lower()
    if flag not in ("true", "false", "1", "0", "yes", "no"):
        raise UserError(f"--masks {masks!r} is not true or false.", fix="Use --masks true (default) or --masks false.")
    report = run_eval(
        checkpoint=checkpoint, data_root=data_root, split=split, ema=ema, masks=flag in ("true", "1", "yes") and not no_masks,
        img_size=img_size,
        batch_size=batch_size, device=device, limit=limit, output=output, save_json=save_json, task=task,
        fold=fold, coco_backend=coco_backend, plots=plots,
    )
    print_report(report)


def print_report(report: dict) -> None:
    """One table per IoU type (rows: stats, columns: decode paths), then the timings."""
    from rich.table import Table

    from lucidyolo.cli.console import console, info

    paths = report["paths"]
    iou_types = list(next(iter(paths.values()))) if paths else []
    for iou_type in iou_types:
        table = Table(
            title=f"lucid eval {report['task']} ({iou_type}): {report['num_images']} images at {report['img_size']} px "
                  f"({report['weights']} weights)"
        )
        table.add_column("stat")
        for path in paths:
            table.add_column(path, justify="right")
        for name in next(iter(paths.values()))[iou_type]["stats"]:
            table.add_row(name, *(f"{p[iou_type]['stats'][name]:.4f}" for p in paths.values()))
        console.print(table)
    first = next(iter(paths.values()), {})
    for iou_type, stats in first.items():
        if isinstance(stats, dict) and stats.get("per_class"):
            console.print(per_class_table(next(iter(paths)), iou_type, stats))
    source = report.get("img_size_source")
    if source:
        info(f"image size: {report['img_size']} px ({source})")
    if report.get("plots"):
        info(f"plots: {len(report['plots'])} files in {Path(report['plots'][0]).parent}")
    info(f"timings: {', '.join(f'{k} {v:.2f}' for k, v in report['timings'].items())}")


def per_class_table(path: str, iou_type: str, stats: dict) -> Any:
    """Rows: classes; columns: ground truths, AP, AP50 and precision / recall at the best mean-F1 confidence."""
    from rich.table import Table

    curves = stats.get("curves") or {}
    at = f", P / R at conf {curves['best_conf']:.3f}" if curves.get("best_conf") is not None else ""
    table = Table(title=f"per class ({iou_type}, {path}{at})")
    for name in ("class", "gt", "AP", "AP50", "P", "R"):
        table.add_column(name, justify="left" if name == "class" else "right")

    def cell(value: Any) -> str:
        return "-" if value is None or (isinstance(value, float) and value < 0) else f"{value:.4f}"

    for c in stats["per_class"]:
        table.add_row(str(c.get("name")), str(c.get("num_gt", c.get("gt", ""))), cell(c.get("ap")), cell(c.get("ap50")),
                      cell(c.get("precision")), cell(c.get("recall")))
    return table
