"""results.csv: conventional column names, resume-safe rows."""

from __future__ import annotations

import math

import pytest

from lucidyolo.engine.run.results_csv import (
    read_results,
    results_columns,
    task_results_columns,
    write_results_row,
)
from lucidyolo.tasks.api import MetricSpec, TaskSpec
from lucidyolo.tasks.registry import get_task


def det_columns(num_param_groups: int = 1) -> list[str]:
    return task_results_columns(get_task("det"), num_param_groups)


def test_det_columns_follow_the_convention():
    assert det_columns(num_param_groups=3) == [
        "epoch",
        "train/box_loss", "train/cls_loss", "train/l1_loss",
        "metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)", "metrics/mAP50-95(B)",
        "val/box_loss", "val/cls_loss", "val/l1_loss",
        "lr/pg0", "lr/pg1", "lr/pg2",
    ]  # fmt: skip


def test_columns_come_from_the_task_declaration_not_its_name():
    from lucidyolo.config.schema import ModelConfig

    spec = TaskSpec(
        name="anything", config_model=ModelConfig, loss_terms=("ce",),
        metrics=MetricSpec(keys=("val/top1", "val/top5"), columns={"val/top1": "metrics/top1"}),
    )
    assert task_results_columns(spec) == ["epoch", "train/ce_loss", "metrics/top1", "val/top5", "val/ce_loss", "lr/pg0"]


def test_rows_append_and_blank_cells_read_as_nan(tmp_path):
    cols = det_columns()
    path = tmp_path / "results.csv"
    write_results_row(path, {"epoch": 0, "train/box_loss": 1.25, "lr/pg0": 0.01}, cols)
    write_results_row(path, {"epoch": 1, "train/box_loss": 0.5, "metrics/mAP50(B)": 0.125}, cols)
    header = path.read_text().splitlines()[0]
    assert header == ",".join(cols)
    columns, rows = read_results(path)
    assert columns == cols
    assert [r["epoch"] for r in rows] == [0, 1]
    assert rows[1]["train/box_loss"] == 0.5 and rows[1]["metrics/mAP50(B)"] == 0.125
    assert math.isnan(rows[0]["metrics/mAP50(B)"])


def test_rewriting_an_epoch_after_resume_drops_the_stale_rows(tmp_path):
    cols = det_columns()
    path = tmp_path / "results.csv"
    for e in range(4):
        write_results_row(path, {"epoch": e, "train/box_loss": float(e)}, cols)
    # resumed from the epoch-1 checkpoint: epochs 2 and 3 are redone
    write_results_row(path, {"epoch": 2, "train/box_loss": 20.0}, cols)
    _, rows = read_results(path)
    assert [(r["epoch"], r["train/box_loss"]) for r in rows] == [(0, 0.0), (1, 1.0), (2, 20.0)]


def test_unknown_column_or_missing_epoch_is_refused(tmp_path):
    cols = det_columns()
    with pytest.raises(ValueError, match="no column"):
        write_results_row(tmp_path / "r.csv", {"epoch": 0, "train/dfl_loss": 1.0}, cols)
    with pytest.raises(ValueError, match="epoch"):
        write_results_row(tmp_path / "r.csv", {"train/box_loss": 1.0}, cols)


def test_existing_file_with_other_columns_is_not_mixed(tmp_path):
    path = tmp_path / "results.csv"
    write_results_row(path, {"epoch": 0}, det_columns())
    with pytest.raises(ValueError, match="columns"):
        write_results_row(path, {"epoch": 1}, results_columns(("box", "seg"), ["metrics/mAP50(M)"]))


def test_a_file_from_before_added_columns_takes_the_new_header(tmp_path):
    """A run resumed after an upgrade that added columns (precision / recall) keeps its rows, new cells empty."""
    path = tmp_path / "results.csv"
    old = ["epoch", "train/box_loss", "metrics/mAP50(B)"]
    write_results_row(path, {"epoch": 0, "train/box_loss": 1.5, "metrics/mAP50(B)": 0.25}, old)
    new = ["epoch", "train/box_loss", "metrics/precision(B)", "metrics/mAP50(B)"]
    write_results_row(path, {"epoch": 1, "train/box_loss": 1.0, "metrics/precision(B)": 0.5, "metrics/mAP50(B)": 0.5}, new)
    columns, rows = read_results(path)
    assert columns == new and [r["epoch"] for r in rows] == [0.0, 1.0]
    assert rows[0]["metrics/mAP50(B)"] == 0.25 and math.isnan(rows[0]["metrics/precision(B)"])
    with pytest.raises(ValueError, match="expected"):  # a column that disappears is still refused
        write_results_row(path, {"epoch": 2}, ["epoch", "train/box_loss"])
