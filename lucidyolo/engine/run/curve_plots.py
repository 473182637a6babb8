"""PNG drawings (and the JSON of their numbers) of one IoU type's :class:`~lucidyolo.metrics.curves.Curves`.

Files, for a ``prefix`` (:func:`plot_prefix`: ``box``, ``mask``, ``keypoints``, ``obb``; the same in a
run folder and in ``lucid eval --plots DIR``, where a second decode path adds its name, ``nms_box``):

* ``{prefix}_pr_curve.png``: precision against recall per class (up to
  :data:`MAX_LEGEND` in the legend with their AP) and the class mean, bold;
* ``{prefix}_f1_curve.png``: F1 against confidence, the best mean-F1 confidence marked;
* ``{prefix}_p_curve.png`` / ``{prefix}_r_curve.png``: precision / recall against confidence;
* ``{prefix}_confusion_matrix.png`` (counts) and ``{prefix}_confusion_matrix_normalized.png``
  (each true-class row divided by its sum, 2 decimals): rows are the true class, columns the
  predicted one, background last (:func:`confusion_cells` decides every label and cell text);
* ``{prefix}_curves.json``: :meth:`Curves.to_json`.

matplotlib is imported here only (object-oriented API on an Agg canvas, as
:mod:`lucidyolo.engine.run.plots`), so ``lucid --help`` never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.metrics.curves import Curves

MAX_LEGEND = 10
"""Classes named in a curve's legend (more classes: thin grey lines, only the mean named)."""

MAX_MATRIX_LABELS = 30
"""Classes whose names label the confusion matrix (more: no tick labels, no cell numbers)."""

TRUE_AXIS = "true class"
PREDICTED_AXIS = "predicted class"
BACKGROUND_ROW = "background (false detection)"
"""The last row: detections that match no ground truth."""
BACKGROUND_COLUMN = "background (missed)"
"""The last column: ground truths no detection found."""


def plot_prefix(key: str, names: Mapping[str, str] | None = None) -> str:
    """The file-name prefix of the curves of IoU type ``key``: the task's name for it
    (``MetricSpec.plot_names``: ``"B"`` and ``"bbox"`` both ``"box"``), else ``key`` made file-safe."""
    import re

    return (names or {}).get(key) or re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_") or "curves"


def confusion_values(cm: np.ndarray, normalise: bool) -> np.ndarray:
    """``cm`` as drawn: float counts, or each row divided by its sum (an empty row stays 0)."""
    values = np.asarray(cm, dtype=np.float64)
    if normalise:
        sums = values.sum(axis=1, keepdims=True)
        values = np.divide(values, sums, out=np.zeros_like(values), where=sums > 0)
    return values


def confusion_cells(cm: np.ndarray, normalise: bool, cmap: str = "Blues") -> list[tuple[int, int, str, str]]:
    """``(row, column, text, colour)`` of every non-zero cell of the drawn matrix.

    ``text`` is the count, or the row share with 2 decimals (``normalise``); ``colour``
    is ``"white"`` or ``"black"``, whichever contrasts more with the cell's own colour in
    ``cmap`` (the colour scale :func:`confusion_figure` uses; WCAG relative luminance).
    """
    from matplotlib import colormaps

    values = confusion_values(cm, normalise)
    top = 1.0 if normalise else max(float(values.max(initial=0.0)), 1.0)
    colours = colormaps[cmap]
    cells = []
    for i, j in zip(*np.nonzero(values), strict=True):
        v = float(values[i, j])
        rgb = np.asarray(colours(v / top)[:3])
        linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        luminance = float(linear @ np.array([0.2126, 0.7152, 0.0722]))
        # the text colour of higher contrast (WCAG): white and black tie at a luminance of 0.179
        colour = "white" if luminance < 0.179 else "black"
        cells.append((int(i), int(j), f"{v:.2f}" if normalise else f"{int(round(v))}", colour))
    return cells


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


def confusion_figure(
    cm: np.ndarray, names: list[str] | tuple[str, ...], normalise: bool, iou: float, conf: float,
) -> Any:
    """The confusion matrix ``cm`` (``(C + 1, C + 1)``, rows true, columns predicted, background last) as a figure.

    Axis titles :data:`TRUE_AXIS` / :data:`PREDICTED_AXIS`; the background row and column
    named :data:`BACKGROUND_ROW` / :data:`BACKGROUND_COLUMN`; the cell numbers of
    :func:`confusion_cells` (up to :data:`MAX_MATRIX_LABELS` classes).
    """
    values = confusion_values(cm, normalise)
    n = values.shape[0]
    side = min(max(5.0, 0.45 * n + 2.5), 16.0)
    fig = _figure((side + 1.0, side))
    ax = fig.add_subplot()
    top = 1.0 if normalise else max(float(values.max(initial=0.0)), 1.0)
    image = ax.imshow(values, cmap="Blues", vmin=0.0, vmax=top)
    fig.colorbar(image, ax=ax, shrink=0.8, label="share of the true class" if normalise else "count")
    if n <= MAX_MATRIX_LABELS + 1:
        names = [str(x) for x in names] if len(names) == n - 1 else [str(c) for c in range(n - 1)]
        slant = {"rotation": 35, "ha": "right", "rotation_mode": "anchor"} if n <= 12 else {"rotation": 90}
        ax.set_xticks(range(n), [*names, BACKGROUND_COLUMN], fontsize=7, **slant)
        ax.set_yticks(range(n), [*names, BACKGROUND_ROW], fontsize=7)
        size = 8 if n <= 10 else 6
        for i, j, text, colour in confusion_cells(cm, normalise):
            ax.text(j, i, text, ha="center", va="center", fontsize=size, color=colour)
    kind = "row-normalised" if normalise else "counts"
    ax.set_xlabel(PREDICTED_AXIS, fontsize=10, fontweight="bold")
    ax.set_ylabel(TRUE_AXIS, fontsize=10, fontweight="bold")
    ax.set_title(f"Confusion matrix, {kind}\n(IoU {iou:g}, confidence {conf:.3f})", fontsize=10)
    return fig


def _confusion_figure(curves: Curves, normalise: bool) -> Any:
    return confusion_figure(
        curves.confusion, curves.matches.names, normalise, curves.matches.iou_threshold, curves.best_conf
    )


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
