"""``lucid model``: inspect model variants (size summary). Imports no torch at module level."""

from __future__ import annotations

import json

import typer

from lucidyolo.cli.vocabulary import HabitCommand, HabitGroup
from lucidyolo.tasks.default import DEFAULT_TASK

app = typer.Typer(help="Inspect YOLO26 model variants.", no_args_is_help=True, cls=HabitGroup)


@app.callback()
def model() -> None:
    """Inspect YOLO26 model variants (keeps ``summary`` a sub-command)."""


@app.command(cls=HabitCommand)
def summary(
    variant: str = typer.Option("n", "--variant", "-v", help="Variant: n, s, m, l or x."),
    task: str = typer.Option(DEFAULT_TASK, "--task", help="Task name or alias (`lucid plugins` lists them)."),
    num_classes: int = typer.Option(80, "--num-classes", help="Number of classes."),
    img_size: int = typer.Option(640, "--img-size", help="Square input size in pixels (multiple of 32)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Print parameters (whole trained model) and GFLOPs (deployed graph) of one variant."""
    from lucidyolo.errors import ConfigError

    if img_size <= 0 or img_size % 32:
        raise ConfigError(
            f"--img-size {img_size} is not a positive multiple of 32.",
            why="the network downsamples by 32.",
            fix="use e.g. 320, 640 or 1024.",
        )
    from lucidyolo.engine.commands.summary import (
        task_model_summary,  # torch is imported here, not at CLI start
    )

    info = task_model_summary(task, variant, num_classes, img_size)
    if as_json:
        typer.echo(json.dumps(info))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{info['model']} ({info['task']}, {num_classes} classes, {img_size} px)")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("params, whole model (o2m + o2o)", f"{info['params'] / 1e6:.3f} M")
    table.add_row("params, deployed (trunk + o2o + extras)", f"{info['params_deploy'] / 1e6:.3f} M")
    table.add_row("GFLOPs, deployed graph", f"{info['gflops']:.2f}")
    table.add_row("anchors", str(info["anchors"]))
    Console().print(table)
