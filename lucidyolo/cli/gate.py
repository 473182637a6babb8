"""``lucid gate``: minutes-long wiring gates."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True)


@app.command("overfit")
def overfit(
    task: str = typer.Option("det", "--task", help="Task to gate (name or alias)."),
) -> None:
    """Overfit a small synthetic slice and check the task's floor (det: train recall >= 0.95)."""
    from lucidyolo.errors import NotAvailableError
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    raise NotAvailableError(
        f"`lucid gate overfit --task {spec.name}` is not available yet.",
        why="the gate needs the training engine (see the status table in the README).",
        fix="Nothing was run.",
    )
