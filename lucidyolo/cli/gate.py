"""``lucid gate``: minutes-long wiring gates."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from lucidyolo.cli.vocabulary import HabitCommand, HabitGroup
from lucidyolo.tasks.default import DEFAULT_TASK

app = typer.Typer(no_args_is_help=True, cls=HabitGroup)


@app.command("overfit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, cls=HabitCommand)
def overfit(
    ctx: typer.Context,
    task: str = typer.Option(DEFAULT_TASK, "--task", help="Task to gate (name or alias)."),
    epochs: int | None = typer.Option(None, "--epochs", help="Override the recipe's epochs (default: the task's gate recipe)."),
    images: int | None = typer.Option(None, "--images", help="Synthetic slice size (default: the task's gate recipe)."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default 320)."),
    workdir: Path | None = typer.Option(None, "--workdir", help="Keep data and run here (default: a temp dir)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Overfit a small synthetic slice and check the task's floor (e.g. det: train recall >= 0.95;
    seg: mean mask IoU >= 0.70; keypoints: OKS AP >= 0.30).

    Dotted options change the gate recipe for an ablation, e.g.
    [bold]lucid gate overfit --task keypoints --model.keypoint_loss laplace_nll[/bold];
    the result lists them.

    Exits 0 at or above the floor, 1 below it.
    """
    from lucidyolo.cli.console import console, info
    from lucidyolo.cli.vocabulary import command_options
    from lucidyolo.config.overrides import parse_overrides
    from lucidyolo.engine.commands.gate import run_overfit_gate

    overrides = parse_overrides(list(ctx.args), command_options(ctx.command), "lucid gate overfit")
    result = run_overfit_gate(
        task, epochs=epochs, images=images, img_size=img_size, workdir=workdir, overrides=overrides,
        log=None if as_json else info, progress_bar=console.is_terminal and not as_json,
    )
    if as_json:
        typer.echo(json.dumps(result))
    else:
        verdict = "[green]PASS[/green]" if result["passed"] else "[red]FAIL[/red]"
        console.print(
            f"gate overfit {result['task']}: {result['metric']} = {result['value']:.4f}, "
            f"floor {result['floor']:.2f}, {verdict}, wall {result['wall_s']:.0f} s "
            f"({result['images']} images, {result['epochs']} epochs, {result['img_size']} px)"
            + (f", recipe overrides {result['overrides']}" if result["overrides"] else "")
        )
    if not result["passed"]:
        raise typer.Exit(1)
