"""PNG drawings (and the JSON of their numbers) of one IoU type's :class:`~lucidyolo.metrics.curves.Curves`.

Files, for a ``prefix`` (``B`` in a run folder, ``{stem}_bbox`` for ``lucid eval --plots``):

* ``{prefix}_pr_curve.png``: precision against recall per class (up to
  :data:`MAX_LEGEND` in the legend with their AP) and the class mean, bold;
* ``{prefix}_f1_curve.png``: F1 against confidence, the best mean-F1 confidence marked;
* ``{prefix}_p_curve.png`` / ``{prefix}_r_curve.png``: precision / recall against confidence;
* ``{prefix}_confusion_matrix.png`` (counts) and ``{prefix}_confusion_matrix_normalized.png``
  (each true-class row divided by its sum), background last;
* ``{prefix}_curves.json``: :meth:`Curves.to_json`.

matplotlib is imported here only (object-oriented API on an Agg canvas, as
:mod:`lucidyolo.engine.plots`), so ``lucid --help`` never loads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.metrics.curves import Curves

MAX_LEGEND = 10
"""Classes named in a curve's legend (more classes: thin grey lines, only the mean named)."""

MAX_MATRIX_LABELS = 30
"""Classes whose names label the confusion matrix (more: no tick labels, no cell numbers)."""


def _figure(size: tuple[float, float] = (6.0, 4.5)) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _class_lines(ax: Any, x: np.ndarray, rows: np.ndarray, curves: Curves, label: Any) -> None:
    names = curves.matches.names
    named = int(curves.has_gt.sum()) <= MAX_LEGEND
    for c in np.flatnonzero(curves.has_gt).tolist():
        if named:
            ax.plot(x, rows[c], linewidth=1.0, label=label(c, names[c]))
        else:
            ax.plot(x, rows[c], linewidth=0.5, color="grey", alpha=0.4)


def curve_figures(curves: Curves) -> dict[str, Any]:
    """Matplotlib figures by file suffix (``pr_curve``, ``f1_curve``, ``p_curve``, ``r_curve``,
    ``confusion_matrix``, ``confusion_matrix_normalized``)."""
    ok = curves.has_gt
    iou = curves.matches.iou_threshold
    figs: dict[str, Any] = {}

    fig = _figure()
    ax = fig.add_subplot()
    _class_lines(
        ax, curves.recall, curves.precision, curves, lambda c, n: f"{n} {curves.ap[c]:.3f}"
    )
    if ok.any():
        ax.plot(
            curves.recall,
            curves.precision[ok].mean(0),
            linewidth=2.5,
            color="C0" if ok.sum() > MAX_LEGEND else "k",
            label=f"all classes {curves.map:.3f} mAP@{iou:g}",
        )
    ax.set(
        xlabel="recall",
        ylabel="precision",
        xlim=(0, 1),
        ylim=(0, 1.01),
        title=f"Precision-recall (IoU {iou:g})",
    )
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(True, alpha=0.3)
    figs["pr_curve"] = fig

    for key, rows, name in (
        ("f1_curve", curves.f1_conf, "F1"),
        ("p_curve", curves.p_conf, "precision"),
        ("r_curve", curves.r_conf, "recall"),
    ):
        fig = _figure()
        ax = fig.add_subplot()
        _class_lines(ax, curves.conf, rows, curves, lambda c, n: n)
        if ok.any():
            mean = rows[ok].mean(0)
            best = curves.best_index
            ax.plot(
                curves.conf,
                mean,
                linewidth=2.5,
                color="k",
                label=f"all classes {mean[best]:.3f} at {curves.best_conf:.3f}",
            )
            ax.axvline(
                curves.best_conf,
                color="r",
                linestyle="--",
                linewidth=1.0,
                label=f"best mean F1 at {curves.best_conf:.3f}",
            )
        ax.set(
            xlabel="confidence",
            ylabel=name,
            xlim=(0, 1),
            ylim=(0, 1.01),
            title=f"{name} against confidence (IoU {iou:g})",
        )
        ax.legend(fontsize=7, loc="lower left")
        ax.grid(True, alpha=0.3)
        figs[key] = fig

    for key, normalise in (("confusion_matrix", False), ("confusion_matrix_normalized", True)):
        figs[key] = _confusion_figure(curves, normalise)
    return figs


def _confusion_figure(curves: Curves, normalise: bool) -> Any:
    cm = curves.confusion.astype(np.float64)
    if normalise:
        sums = cm.sum(axis=1, keepdims=True)
        cm = np.divide(cm, sums, out=np.zeros_like(cm), where=sums > 0)
    n = cm.shape[0]
    labels = [*curves.matches.names, "background"]
    side = min(max(4.5, 0.45 * n + 2.0), 16.0)
    fig = _figure((side + 1.0, side))
    ax = fig.add_subplot()
    image = ax.imshow(cm, cmap="Blues", vmin=0.0, vmax=1.0 if normalise else max(cm.max(), 1.0))
    fig.colorbar(image, ax=ax, shrink=0.8)
    if n <= MAX_MATRIX_LABELS + 1:
        ax.set_xticks(range(n), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(n), labels, fontsize=7)
        high = cm.max() / 2 if cm.max() > 0 else 0.5
        for i, j in zip(*np.nonzero(cm), strict=True):
            text = f"{cm[i, j]:.2f}" if normalise else f"{int(cm[i, j])}"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=6,
                color="white" if cm[i, j] > high else "black",
            )
    kind = "row-normalised" if normalise else "counts"
    ax.set(
        xlabel="predicted",
        ylabel="true",
        title=f"Confusion matrix, {kind} (IoU {curves.matches.iou_threshold:g}, conf {curves.best_conf:.3f})",
    )
    return fig


def write_curve_plots(curves: Curves, out_dir: str | Path, prefix: str) -> list[Path]:
    """Write the six PNGs and ``{prefix}_curves.json`` into ``out_dir`` (created); returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for key, fig in curve_figures(curves).items():
        path = out / f"{prefix}_{key}.png"
        with atomic_open(path, "wb") as f:
            fig.savefig(f, format="png")
        paths.append(path)
    path = out / f"{prefix}_curves.json"
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(curves.to_json(), f)
    return [*paths, path]
