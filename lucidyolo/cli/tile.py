"""``lucid data tile``: cut large scenes into training tiles (no torch imports).

The tiler itself (:mod:`lucidyolo.data.dota.tiler`, numpy/shapely/PIL) is imported
inside the command, so ``lucid --help`` and ``lucid data tile dota --help``
stay light.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from lucidyolo.cli.vocabulary import HabitCommand, HabitGroup, renamed

app = typer.Typer(help="Cut large scenes into training tiles.", no_args_is_help=True, add_completion=False, cls=HabitGroup)


@app.command("dota", cls=HabitCommand)
def dota(
    data_root: Path | None = typer.Option(None, "--data-root", help="DOTA-v1.0 root: {split}/images + {split}/labelTxt, or a flat images + labelTxt (then give one split). (required)", show_default=False),
    out: Path = typer.Option(..., "--out", help="Output COCO container ({split}/ tiles + annotations/instances_{split}.json); may exist, its splits may not."),
    splits: str = typer.Option("train,val", "--splits", help="Comma-separated split names (a flat root takes exactly one)."),
    patch: int = typer.Option(1024, "--patch", help="Tile side in pixels."),
    overlap: int = typer.Option(200, "--overlap", help="Overlap of neighbouring tiles in pixels (smaller than --patch)."),
    workers: int = typer.Option(0, "--workers", help="Scenes tiled in parallel processes (0 = serial); output is identical. Each holds one decoded scene (a 20000 px scene is ~1.2 GB)."),
    suffix: str = typer.Option("png", "--suffix", help="Tile format: png (lossless) or jpg (quality 95)."),
    drop_empty_tiles: bool = typer.Option(False, "--drop-empty-tiles", help="Skip tiles without objects (kept by default)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    old_root: Path | None = typer.Option(None, "--root", hidden=True, help="Deprecated spelling of --data-root."),
) -> None:
    """Tile DOTA-v1.0 scenes into a COCO container of oriented-box tiles.

    Objects cut by a tile edge keep their corners when >= 70% of their area is
    inside, are re-fitted and flagged difficult when less, dropped when none.
    """
    root = renamed(old_root, data_root, "--root", "--data-root")
    if root is None:
        from lucidyolo.errors import DataError

        raise DataError("No DOTA root given.", why="the tiler reads the scenes from a dataset root.",
                        fix="Pass --data-root PATH (the folder with {split}/images and {split}/labelTxt).")
    from lucidyolo.data.dota.tiler import tile_dota

    names = [s.strip() for s in splits.split(",") if s.strip()]
    progress = None
    on_start = on_scene = None
    if sys.stderr.isatty() and not as_json:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        progress = Progress(
            TextColumn("tiling"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), TextColumn("{task.description}"),
            console=Console(stderr=True), transient=True,
        )  # fmt: skip
        bar = progress.add_task("", total=None)

        def on_start(n: int) -> None:
            progress.update(bar, total=n)

        def on_scene(split: str, res) -> None:
            progress.update(bar, advance=1, description=f"{split}/{res.name}")
    else:

        def on_scene(split: str, res) -> None:
            typer.echo(f"{split}/{res.name}: {res.tiles} tiles, {res.objects} objects", err=True)

    if progress is not None:
        with progress:
            summary = tile_dota(root, out, names, patch=patch, overlap=overlap, workers=workers, suffix=suffix,
                                drop_empty_tiles=drop_empty_tiles, on_scene=on_scene, on_start=on_start)  # fmt: skip
    else:
        summary = tile_dota(root, out, names, patch=patch, overlap=overlap, workers=workers, suffix=suffix,
                            drop_empty_tiles=drop_empty_tiles, on_scene=on_scene)  # fmt: skip
    d = summary.to_dict()
    for s in summary.splits:
        if s.kept_identical:
            typer.echo(f"Split {s.split!r} was written into {out} by another run while this one tiled; its files are "
                       "byte-identical to this run's and were kept.", err=True)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(d, indent=2))
        return
    dropped = d["dropped_degenerate"] + d["dropped_slivers"]
    empty = f"{d['empty_tiles']} empty" + (f", {d['empty_tiles_dropped']} empty skipped" if drop_empty_tiles else "")
    nolabel = f" ({d['scenes_without_labels']} without a label file: no objects)" if d["scenes_without_labels"] else ""
    typer.echo(
        f"Tiled {d['scenes']} scenes{nolabel} ({', '.join(names)}) into {d['tiles']} tiles ({empty}): "
        f"{d['objects']} objects kept, {d['difficult_by_clipping']} flagged difficult by clipping, "
        f"{dropped} dropped ({d['dropped_degenerate']} zero-area in the labels, {d['dropped_slivers']} slivers), "
        f"{d['seconds']:.1f} s. Use --data-root {out}"
    )
