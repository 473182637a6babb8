"""``labels.png``: the panels of :func:`lucidyolo.engine.label_stats.label_statistics`, one generic drawer.

Every panel, the engine's and a task's own (``TaskSpec.label_stats``), is plain
data of one of three kinds (bars, histogram, histogram2d) and is drawn by
:func:`draw_panel`; nothing here knows which task produced it. matplotlib is
imported lazily, through its object-oriented API and the Agg canvas (no
``pyplot``), as in :mod:`lucidyolo.engine.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
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
    # fixed margins, not the constrained layout: it lays the figure out by drawing it once more (half the time)
    height = 3.4 * len(rows)
    fig = Figure(figsize=(4.2 * _COLUMNS, height), dpi=100)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(len(rows), _COLUMNS, left=0.05, right=0.97, top=1 - 0.75 / height, bottom=1.1 / height,
                            hspace=0.75, wspace=0.35)
    for r, row in enumerate(rows):
        for c, panel in enumerate(row):
            ax = fig.add_subplot(grid[r, :] if len(row) == 1 and _is_wide(panel) else grid[r, c])
            draw_panel(ax, panel)
    counted = stats["instances"] if stats["counted"] == "instances" else sum(stats["per_class"])
    fig.suptitle(f"{stats.get('split') or 'training split'}: {stats['images']} images, {counted} "
                 f"{stats['counted']}, {len(stats['classes'])} classes", fontsize=10)
    out = Path(path)
    with atomic_open(out, "wb") as f:
        fig.savefig(f, format="png")
    return out


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
