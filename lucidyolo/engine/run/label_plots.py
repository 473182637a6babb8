"""``labels.png``: the panels of :func:`lucidyolo.engine.run.label_stats.label_statistics`, one generic drawer.

Every panel, the engine's and a task's own (``TaskSpec.label_stats``), is plain
data of one of three kinds (bars, histogram, histogram2d) and is drawn by
:func:`draw_panel`; nothing here knows which task produced it. matplotlib is
imported lazily, through its object-oriented API and the Agg canvas (no
``pyplot``), as in :mod:`lucidyolo.engine.run.plots`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from lucidyolo.atomic_write import atomic_open

_COLUMNS = 3
_WIDE_BARS = 12
"""A bar panel with more categories than this takes a whole row (80 COCO class names stay legible)."""
_NAMED_BARS = 100
"""Above this many categories the ticks show no names (a thousand labels are unreadable and slow to lay out)."""


def draw_label_stats(stats: Mapping[str, Any], path: str | Path) -> Path:
    """Draw every panel of ``stats`` into one PNG at ``path`` (written atomically); returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = _rows(list(stats["panels"].values()))
    # fixed margins, not the constrained layout: it lays the figure out by drawing it once more (half the
    # time). The margins leave room for rotated class names; saving crops what they did not use (the
    # picture of a one-row figure was a third blank below its panels).
    height = 3.4 * len(rows)
    fig = Figure(figsize=(4.2 * _COLUMNS, height), dpi=100)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(len(rows), _COLUMNS, left=0.05, right=0.97, top=1 - 0.75 / height, bottom=1.1 / height,
                            hspace=0.75, wspace=0.35)
    for r, row in enumerate(rows):
        for c, panel in enumerate(row):
            ax = fig.add_subplot(grid[r, :] if len(row) == 1 and _is_wide(panel) else grid[r, c])
            draw_panel(ax, panel)
    fig.suptitle(label_title(stats), fontsize=10)
    out = Path(path)
    with atomic_open(out, "wb") as f:
        fig.savefig(f, format="png", bbox_inches="tight", pad_inches=0.15)
    return out


def label_title(stats: Mapping[str, Any]) -> str:
    """The title of ``labels.png``: ``coco128 (train split): 128 images, 929 instances, 80 classes``.

    The dataset is named by :func:`dataset_name` from the split's reader name, never by a whole path.
    """
    counted = stats["instances"] if stats["counted"] == "instances" else sum(stats["per_class"])
    dataset, split = dataset_name(str(stats.get("split") or ""))
    where = f"{dataset} ({split} split)" if split else dataset or "training split"
    return f"{where}: {stats['images']} images, {counted} {stats['counted']}, {len(stats['classes'])} classes"


_ANNOTATION_FILES = (".json", ".yaml", ".yml", ".txt")
_ANNOTATION_FOLDERS = ("annotations", "labels")


def dataset_name(source_name: str) -> tuple[str, str]:
    """``(dataset, split)`` of a reader's split name (``ImageSource.name``), for titles.

    The readers name a split ``"{data root or annotation file} [{split}]"``; the
    dataset is the data root's folder name (``/data/coco128 [train]``: ``coco128``),
    an annotation file's dataset folder (``/d/coco/annotations/instances_train.json``:
    ``coco``; ``/d/set/data.yaml``: ``set``), and a built-in synthetic set's cache
    folder is ``synthetic set``. A name that is no path is kept; ``split`` is ``""``
    when the name carries none.
    """
    found = re.fullmatch(r"(.*?)\s*\[([^\[\]]*)\]", source_name.strip())
    head, split = (found.group(1), found.group(2).strip()) if found else (source_name.strip(), "")
    if "/" not in head and "\\" not in head:
        return head, split
    path = (PureWindowsPath if "\\" in head else PurePosixPath)(head.rstrip("/\\"))
    if path.suffix.lower() in _ANNOTATION_FILES:
        path = path.parent
        if path.name.lower() in _ANNOTATION_FOLDERS and path.parent.name:
            path = path.parent
    if path.parent.name == "synthetic":  # the embedded default run's set, generated into the cache
        return "synthetic set", split
    return path.name or head, split


def draw_panel(ax: Any, panel: Mapping[str, Any]) -> None:
    """Draw one panel (``bars``, ``histogram`` or ``histogram2d``, see ``TaskSpec.label_stats``) on ``ax``."""
    import numpy as np

    kind = panel["kind"]
    if kind == "bars":
        categories, series = panel["categories"], panel["series"]
        x = np.arange(len(categories))
        width = 0.8 / max(len(series), 1)
        for j, (legend, values) in enumerate(series.items()):
            ax.bar(x + (j - (len(series) - 1) / 2) * width, values, width, label=legend)
        if len(categories) <= _NAMED_BARS:
            ax.set_xticks(x, categories, rotation=90 if len(categories) > 8 else 0,
                          fontsize=7 if len(categories) <= 40 else 5)
        if len(series) > 1:
            ax.legend(fontsize=7)
    elif kind == "histogram":
        ax.stairs(panel["counts"], panel["edges"], fill=True, alpha=0.8)
    elif kind == "histogram2d":
        counts = np.asarray(panel["counts"], dtype=float).T  # (Y, X): pcolormesh wants rows along y
        mesh = ax.pcolormesh(panel["x_edges"], panel["y_edges"], counts, cmap="Blues")
        ax.figure.colorbar(mesh, ax=ax, shrink=0.8).ax.tick_params(labelsize=7)
        ax.set_aspect("equal")
        if panel.get("y_down"):
            ax.invert_yaxis()
    else:
        raise ValueError(f"unknown panel kind {kind!r}")
    ax.set_title(panel.get("title", ""), fontsize=9)
    ax.set_xlabel(panel.get("xlabel", ""), fontsize=8)
    ax.set_ylabel(panel.get("ylabel", ""), fontsize=8)
    ax.tick_params(labelsize=7)


def _is_wide(panel: Mapping[str, Any]) -> bool:
    return panel["kind"] == "bars" and len(panel["categories"]) > _WIDE_BARS


def _rows(panels: list[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Panels in order, ``_COLUMNS`` to a row; a wide bar panel alone on its row."""
    rows: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    for panel in panels:
        if _is_wide(panel):
            if current:
                rows.append(current)
                current = []
            rows.append([panel])
        else:
            current.append(panel)
            if len(current) == _COLUMNS:
                rows.append(current)
                current = []
    if current:
        rows.append(current)
    return rows
