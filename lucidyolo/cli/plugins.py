"""``lucid plugins``: list task plugins (loads specs, never torch)."""

from __future__ import annotations

import json

import typer

from lucidyolo.cli.console import console


def plugins(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List task plugins: name, aliases, distribution, version, API version, status and any load error.

    Below the table, each task's decode paths (`lucid predict --decoder`, the first the default) and
    evaluation options (`lucid eval --option NAME=VALUE`).
    """
    from rich.table import Table

    from lucidyolo.tasks.api import PLUGIN_API_VERSION
    from lucidyolo.tasks.registry import discover

    records = discover()
    version = ".".join(map(str, PLUGIN_API_VERSION))
    if as_json:
        typer.echo(json.dumps({"plugin_api_version": version, "tasks": [r.as_dict() for r in records]}, indent=2))
        return
    table = Table(title=f"lucidyolo task plugins (plugin API {version})")
    for col in ("task", "aliases", "distribution", "version", "API", "status", "error"):
        table.add_column(col)
    for r in records:
        d = r.as_dict()
        style = {"ok": "green", "skipped": "yellow"}.get(r.status, "red")
        table.add_row(
            r.name,
            ", ".join(d["aliases"]),  # type: ignore[arg-type]
            str(r.distribution),
            str(r.version),
            str(d["api_version"] or "-") + (" (adapted)" if d["adapted"] else ""),
            f"[{style}]{r.status}[/{style}]",
            r.error or (f"warning: {r.warning}" if r.warning else ""),
        )
    console.print(table)
    for r in records:
        if r.spec is None:
            continue
        line = f"{r.name}: decode paths {', '.join(r.spec.decode_paths)} (default {r.spec.default_decode_path})"
        options = "; ".join(o.describe() for o in r.spec.eval_options)
        console.print(line + (f"; eval options: {options}" if options else "; no eval options"),
                      highlight=False, markup=False, soft_wrap=True)
