"""PNG curves of ``results.csv``, written at the end of a run.

matplotlib is imported lazily (it costs ~0.5 s) and used through its
object-oriented API with the Agg canvas directly: no ``pyplot``, no global
backend switch, so it works headless and never disturbs a user's own
matplotlib state.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from lucidyolo.atomic_write import atomic_open
from lucidyolo.engine.run.results_csv import read_results

_PANELS_PER_ROW = 5


def plot_results(csv_path: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw every column of ``results.csv`` against ``epoch``.

    Writes ``results.png`` (one panel per column that has at least one value,
    in file order) into ``out_dir``.

    Args:
        csv_path: a ``results.csv`` written by
            :func:`lucidyolo.engine.run.results_csv.write_results_row`.
        out_dir: destination folder (created if needed).

    Returns:
        The PNG paths written (empty if the CSV has no rows or no values).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    columns, rows = read_results(csv_path)
    if not rows or "epoch" not in columns:
        return []
    epochs = [r["epoch"] for r in rows]
    series = {
        c: [r[c] for r in rows]
        for c in columns
        if c != "epoch" and any(not math.isnan(r[c]) for r in rows)
    }
    if not series:
        return []
    n = len(series)
    ncols = min(n, _PANELS_PER_ROW)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(3.2 * ncols, 2.6 * nrows), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, (name, values) in zip(axes.flat, series.items(), strict=False):
        # connect the epochs that have a value (validation may run every n epochs;
        # plotting NaNs would leave isolated dots)
        pts = [(e, v) for e, v in zip(epochs, values, strict=True) if not math.isnan(v)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=2.5, linewidth=1.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.png"
    with atomic_open(path, "wb") as f:  # a kill mid-write leaves the previous picture or none, never half of one
        fig.savefig(f, format="png")
    return [path]
