"""``lucid data``: check, synthesise and download datasets (no torch imports)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from lucidyolo.cli.tile import app as tile_app
from lucidyolo.cli.vocabulary import HabitCommand, HabitGroup
from lucidyolo.tasks.default import DEFAULT_TASK

app = typer.Typer(help="Check, generate and download datasets.", no_args_is_help=True, add_completion=False, cls=HabitGroup)
app.add_typer(tile_app, name="tile", help="Cut large scenes into training tiles.")


@app.command("check", cls=HabitCommand)
def check(
    data_root: Path = typer.Option(None, "--data-root", help="Dataset root (COCO container, YOLO root or DOTA root)."),
    layout: str = typer.Option(None, "--layout", help="Force a layout: coco, coco-2017, coco-split, coco-images, coco-export, yolo, dota."),
    task: str = typer.Option(None, "--task", help="Task name or alias (default: inferred from the files)."),
    splits: str = typer.Option("train,val", "--splits", help="Comma-separated splits to check."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    decode: bool = typer.Option(False, "--decode", help="Decode every image fully (slow, thorough)."),
    train_images: Path = typer.Option(
        None, "--train-images", help="Training image folder, with --train-ann-file, instead of a root (fit: data.train_images)."
    ),
    train_ann_file: Path = typer.Option(
        None, "--train-ann-file", help="The COCO JSON of --train-images."
    ),
    val_images: Path = typer.Option(None, "--val-images", help="Validation image folder, with --val-ann-file."),
    val_ann_file: Path = typer.Option(
        None, "--val-ann-file", help="The COCO JSON of --val-images."
    ),
) -> None:
    """Read a dataset the way training will; print counts, the class count, the first bad label file:line and every bad image."""
    from lucidyolo.data.check import check_dataset, infer_fields
    from lucidyolo.errors import DataError
    from lucidyolo.tasks.registry import get_task, task_for_fields

    if data_root is None and train_images is None and val_images is None:
        raise DataError("No dataset given.", fix="Pass --data-root PATH (or --train-images/--train-ann-file).")
    reader = None
    if task is not None:
        spec = get_task(task)
        fields, name, reader = spec.fields, spec.name, spec.read_split
    else:
        fields = infer_fields(data_root, layout) if data_root is not None and data_root.exists() else ()
        found = task_for_fields(fields)
        name = found.name if found is not None else "unknown"
        fields = found.fields if found is not None else fields
    report = check_dataset(
        data_root,
        fields=fields,
        task=name,
        reader=reader,
        layout=layout,
        splits=tuple(s.strip() for s in splits.split(",") if s.strip()),
        decode=decode,
        train_images=train_images,
        train_ann_file=train_ann_file,
        val_images=val_images,
        val_ann_file=val_ann_file,
    )
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _print_report(report)
    if not report.ok:
        raise typer.Exit(code=2)


def _print_report(report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out, err = Console(), Console(stderr=True)
    table = Table(title=f"{report.data_root}  (task {report.task})")
    for col in ("split", "layout", "images", "instances", "background", "classes", "status"):
        table.add_column(col, justify="right" if col in ("images", "instances", "background", "classes") else "left")
    for s in report.splits:
        if not s.found:
            table.add_row(s.split, "-", "-", "-", "-", "-", "[dim]not found[/dim]")
            continue
        status = "[green]ok[/green]" if s.error is None else "[red]error[/red]"
        table.add_row(s.split, s.layout, str(s.images), str(s.instances), str(s.background_images), str(s.classes), status)
    out.print(table)
    for s in report.splits:
        if s.found and s.paths:
            # Below the table, not in it: the words and full paths would wrap a narrow terminal's table.
            what = f"{escape(s.layout_description)}, reading " if s.layout_description else "reading "
            out.print(f"[bold]{s.split}[/bold]: {what}{escape(', '.join(s.paths))}", highlight=False, soft_wrap=True)
        if s.found and s.images_per_class and s.error is None:
            top = sorted(((n, c) for n, c in s.images_per_class.items() if c), key=lambda kv: -kv[1])
            shown = ", ".join(f"{escape(n)} {c}" for n, c in top[:10])
            more = f" (+{len(top) - 10} more)" if len(top) > 10 else ""
            out.print(f"[bold]{s.split}[/bold] images per class: {shown}{more}", highlight=False)
        elif s.found and s.instances_per_class and s.error is None:
            top = sorted(((n, c) for n, c in s.instances_per_class.items() if c), key=lambda kv: -kv[1])
            shown = ", ".join(f"{escape(n)} {c}" for n, c in top[:10])
            more = f" (+{len(top) - 10} more)" if len(top) > 10 else ""
            out.print(f"[bold]{s.split}[/bold] instances per class: {shown}{more}", highlight=False)
        for w in s.warnings:
            out.print(f"[yellow]warning ({s.split}):[/yellow] {escape(w)}", highlight=False, soft_wrap=True)
        if s.bad_images:
            # every file, not only the first: fixing a set one run at a time is what this command saves
            err.print(f"[bold red]{len(s.bad_images)} bad image file(s) ({s.split}):[/bold red]", highlight=False)
            for line in s.bad_images:
                err.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
        if s.error:
            err.print(f"[bold red]error ({s.split}):[/bold red] {escape(s.error)}", highlight=False, soft_wrap=True)
    if report.error:
        err.print(f"[bold red]error:[/bold red] {escape(report.error)}", highlight=False, soft_wrap=True)
    if report.num_classes is not None:
        n = report.num_classes
        out.print(f"[bold]model.num_classes: auto[/bold] (the default) will read {n} classes from this dataset; "
                  f"--model.num_classes {n} pins the count (a set with another count is then refused).",
                  highlight=False)


@app.command("synth", cls=HabitCommand)
def synth(
    out: Path = typer.Option(..., "--out", help="Folder to write (must be empty or absent)."),
    task: str = typer.Option(DEFAULT_TASK, "--task", help="Task name or alias (its fields pick the scene and labels)."),
    images: int = typer.Option(64, "--images", help="Total images (train + val)."),
    img_size: int = typer.Option(320, "--img-size", help="Square image side in pixels."),
    seed: int = typer.Option(0, "--seed"),
    fmt: str = typer.Option("coco", "--format", help="coco or yolo."),
    val_fraction: float = typer.Option(0.2, "--val-fraction"),
) -> None:
    """Write the synthetic shapes dataset (real image files + COCO JSON or a YOLO root)."""
    from lucidyolo.data.synth import write_synthetic
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    if spec.read_split is not None:  # a layout of the task's own: its generator writes it
        if spec.make_synthetic is None:
            from lucidyolo.errors import NotAvailableError

            raise NotAvailableError(f"Task {spec.name!r} has no synthetic set.", fix="Nothing was written.")
        root = spec.make_synthetic(out_dir=out, num_images=images, img_size=img_size, seed=seed)
        typer.echo(f"Wrote {images} synthetic {spec.name} images to {root} (the task's own layout). Use --data-root {root}")
        return
    root = write_synthetic(out, spec.fields, images, img_size, seed, fmt, val_fraction=val_fraction)
    typer.echo(f"Wrote {images} synthetic {spec.name} images to {root} ({fmt}). Use --data-root {root}")


@app.command("download", cls=HabitCommand)
def download(
    dataset: str = typer.Argument(..., help="Dataset name (coco)."),
    data_root: Path = typer.Option(..., "--data-root", help="Target folder."),
    splits: str = typer.Option("train,val", "--splits", help="Comma-separated: train, val."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Check archive checksums before extracting."),
    keep_archives: bool = typer.Option(False, "--keep-archives", help="Keep the zip files."),
) -> None:
    """Download and extract a dataset (resumable, verified, atomic)."""
    from lucidyolo.errors import ConfigError

    if dataset.lower() != "coco":
        raise ConfigError(f"Unknown dataset {dataset!r} for download.", fix="Only `coco` (COCO 2017) can be downloaded.")
    from lucidyolo.data.download import download_coco

    download_coco(
        data_root,
        tuple(s.strip() for s in splits.split(",") if s.strip()),
        verify=verify,
        keep_archives=keep_archives,
        log=typer.echo,
    )
    typer.echo(f"COCO 2017 is ready under {data_root}.")
