"""``results.csv``: one row per epoch, with the column names many tools parse.

Columns (``results_columns``) follow the common ``<split>/<term>`` and
``metrics/<name>(<kind>)`` convention, named after *our* loss terms:

* ``epoch`` (0-based, as Lightning counts);
* ``train/<term>_loss`` and ``val/<term>_loss`` for every loss term the task
  declares (``TaskSpec.loss_terms``), before gains: detection's ``box``
  (1 - CIoU), ``cls`` (BCE), ``l1`` (stride-unit L1);
* the task's epoch metrics under the column names it declares
  (``MetricSpec.columns``; detection: ``metrics/precision(B)``,
  ``metrics/recall(B)``, ``metrics/mAP50(B)``, ``metrics/mAP50-95(B)``);
* ``lr/pg0`` ... one per optimizer parameter group.

``metrics/precision(B)`` / ``metrics/recall(B)`` mean what the tools that parse
them expect: the class means of precision and recall at IoU 0.5 and the
confidence of the best mean F1, read from the metric's own matches
(:mod:`lucidyolo.metrics.curves`).

Writing rewrites the whole (small) file atomically and drops rows whose epoch
is >= the new row's epoch, so a run resumed from ``last.ckpt`` after a crash
that happened between the CSV write and the checkpoint write does not end up
with a duplicated epoch.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from lucidyolo.atomic_write import atomic_open
from lucidyolo.tasks.api import TaskSpec


def results_columns(
    loss_terms: Sequence[str], metric_columns: Sequence[str], num_param_groups: int = 1
) -> list[str]:
    """Column names of ``results.csv``, derived from the task (never from its name).

    Args:
        loss_terms: the criterion's term names (``TaskSpec.loss_terms``, e.g.
            ``box``, ``cls``, ``l1``); each gives ``train/<term>_loss`` and
            ``val/<term>_loss``.
        metric_columns: the epoch metric columns in order
            (``MetricSpec.column(key)`` of every ``MetricSpec.keys`` entry).
        num_param_groups: optimizer parameter groups (``lr/pg0`` ...).

    Returns:
        The ordered column names, ``epoch`` first.
    """
    return [
        "epoch",
        *(f"train/{t}_loss" for t in loss_terms),
        *metric_columns,
        *(f"val/{t}_loss" for t in loss_terms),
        *(f"lr/pg{i}" for i in range(num_param_groups)),
    ]


def task_results_columns(spec: TaskSpec, num_param_groups: int = 1) -> list[str]:
    """:func:`results_columns` of a task: its loss terms and its metric columns in key order."""
    return results_columns(spec.loss_terms, [spec.metrics.column(k) for k in spec.metrics.keys], num_param_groups)


def _fmt(value: float | int | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        raise TypeError("results.csv values are numbers, got a bool")
    if isinstance(value, int):
        return str(value)
    return format(float(value), ".8g")


def read_results(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, float]]]:
    """Read ``results.csv``.

    Returns:
        ``(columns, rows)``; empty cells read as NaN, ``epoch`` as a float.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return [], []
        columns = [c.strip() for c in header]
        rows = [
            {c: float(v) if v.strip() else math.nan for c, v in zip(columns, line, strict=True)}
            for line in reader
            if line
        ]
    return columns, rows


def write_results_row(
    path: str | os.PathLike[str],
    row: Mapping[str, float | int | None],
    columns: Sequence[str],
) -> Path:
    """Add (or replace) one epoch's row of ``results.csv``.

    Args:
        path: the CSV (created with a header if missing).
        row: values by column name; must contain ``epoch``; missing columns
            are written empty; NaN / None are written empty.
        columns: the file's columns (see :func:`results_columns`).

    Returns:
        The path written.

    Raises:
        ValueError: ``row`` has a key outside ``columns`` or lacks ``epoch``,
            or the existing file has a column ``columns`` lacks (a file with
            fewer columns is rewritten under ``columns``, new cells empty).
    """
    columns = list(columns)
    unknown = set(row) - set(columns)
    if unknown:
        raise ValueError(f"results.csv has no column(s) {sorted(unknown)}; columns: {columns}")
    if "epoch" not in row or row["epoch"] is None:
        raise ValueError("a results.csv row needs its 'epoch'")
    path = Path(path)
    epoch = float(row["epoch"])
    kept: list[list[str]] = []
    if path.exists():
        old_columns, old_rows = read_results(path)
        if old_columns and old_columns != columns and not set(old_columns) <= set(columns):
            raise ValueError(
                f"{path} has columns {old_columns}, expected {columns}; "
                "write a new run directory instead of mixing layouts"
            )
        # a file written before columns were added (a run resumed after an upgrade) takes the
        # new header; its rows leave the new columns empty
        kept = [
            [_fmt(int(r[c]) if c == "epoch" else r.get(c)) for c in columns]
            for r in old_rows
            if r["epoch"] < epoch
        ]
    new = [_fmt(int(row["epoch"]) if c == "epoch" else row.get(c)) for c in columns]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([*kept, new])
    _atomic_write_text(path, buf.getvalue())
    return path


def _atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
