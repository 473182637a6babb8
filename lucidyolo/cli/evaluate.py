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
    option: list[str] = typer.Option(
        [], "--option", metavar="NAME=VALUE",
        help="A task evaluation option, repeatable (e.g. masks=false); `lucid plugins` lists each task's.",
    ),
    masks: str | None = typer.Option(None, "--masks", hidden=True, help="Deprecated: --option masks=VALUE."),
    no_masks: bool = typer.Option(False, "--no-masks", hidden=True, help="Deprecated: --option masks=false."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's training size, its data.img_size)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Batch size (default: the task's, 32 for det)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
    limit: int | None = typer.Option(None, "--limit", help="Score only the first N images."),
    output: Path | None = typer.Option(None, "--output", help="Write the report JSON here."),
    save_json: Path | None = typer.Option(
        None, "--save-json", help="Write the results file of the default decode path (each other path's as *_<path>.json beside it)."
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
    """Score a checkpoint with its task's protocol (pycocotools for det), every decode path of the task."""
    from lucidyolo.engine.commands.evaluate import run_eval

    report = run_eval(
        checkpoint=checkpoint, data_root=data_root, split=split, ema=ema, img_size=img_size,
        batch_size=batch_size, device=device, limit=limit, output=output, save_json=save_json, task=task,
        fold=fold, coco_backend=coco_backend, plots=plots, options=parse_options(option),
        fallback_options=deprecated_mask_flags(masks, no_masks),
    )
    print_report(report)


def parse_options(items: list[str]) -> dict[str, str]:
    """``--option NAME=VALUE`` items as ``{NAME: VALUE}`` (the checkpoint's task checks names and values).

    Raises:
        UserError: an item without ``=``, or a name given twice.
    """
    from lucidyolo.errors import UserError

    options: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(
                f"--option {item!r} is not NAME=VALUE.",
                why="an evaluation option needs both its name and its value.",
                fix="Write e.g. --option masks=false (`lucid plugins` lists each task's options).",
            )
        if name in options:
            raise UserError(
                f"--option {name} is given twice ({options[name]!r} and {value!r}).",
                why="one value per option; which one was meant is not clear.",
                fix=f"Keep one --option {name}=VALUE.",
            )
        options[name] = value
    return options


def deprecated_mask_flags(masks: str | None, no_masks: bool) -> dict[str, str]:
    """The old ``--masks true|false`` / ``--no-masks`` as ``{"masks": value}``, with a deprecation warning.

    Applied by the engine only to a task that declares the ``masks`` option and where no
    ``--option masks=`` is given (the flags were ignored by the other tasks, and still are).
    """
    if masks is None and not no_masks:
        return {}
    from lucidyolo.cli.console import err_console
    from lucidyolo.errors import UserError

    if masks is not None and masks.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise UserError(f"--masks {masks!r} is not true or false.", fix="Use --option masks=true or --option masks=false.")
    value = "false" if no_masks else masks.strip().lower() if masks is not None else "true"
    old = "--no-masks" if no_masks else f"--masks {masks}"
    err_console.print(
        f"warning: {old} is deprecated and will be removed in the next release; use --option masks={value} "
        "(same meaning; tasks without a masks option ignore it, as before).",
        highlight=False, markup=False, soft_wrap=True,
    )
    return {"masks": value}


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
