"""results.csv: conventional column names, resume-safe rows."""

from __future__ import annotations

import math

import pytest

from lucidyolo.engine.results_csv import (
    LOGGED_METRIC_TO_COLUMN,
    read_results,
    results_columns,
    write_results_row,
)


def test_det_columns_follow_the_convention():
    assert results_columns("det", num_param_groups=3) == [
        "epoch",
        "train/box_loss", "train/cls_loss", "train/l1_loss",
        "metrics/mAP50(B)", "metrics/mAP50-95(B)",
        "val/box_loss", "val/cls_loss", "val/l1_loss",
        "lr/pg0", "lr/pg1", "lr/pg2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "extra"),
    [
        ("seg", {"train/seg_loss", "train/sem_loss", "metrics/mAP50-95(M)", "metrics/mAP50-95(B)"}),
        ("obb", {"train/angle_loss", "val/angle_loss", "metrics/mAP50-95(B)"}),
        ("pose", {"train/kpt_loss", "metrics/mAP50-95(P)"}),
    ],
)
def test_task_columns_add_their_terms_and_metrics(task, extra):
    cols = results_columns(task)
    assert extra <= set(cols)
    assert len(cols) == len(set(cols))
    assert set(LOGGED_METRIC_TO_COLUMN[task].values()) <= set(cols)


def test_rows_append_and_blank_cells_read_as_nan(tmp_path):
    cols = results_columns("det")
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
    cols = results_columns("det")
    path = tmp_path / "results.csv"
    for e in range(4):
        write_results_row(path, {"epoch": e, "train/box_loss": float(e)}, cols)
    # resumed from the epoch-1 checkpoint: epochs 2 and 3 are redone
    write_results_row(path, {"epoch": 2, "train/box_loss": 20.0}, cols)
    _, rows = read_results(path)
    assert [(r["epoch"], r["train/box_loss"]) for r in rows] == [(0, 0.0), (1, 1.0), (2, 20.0)]


def test_unknown_column_or_missing_epoch_is_refused(tmp_path):
    cols = results_columns("det")
    with pytest.raises(ValueError, match="no column"):
        write_results_row(tmp_path / "r.csv", {"epoch": 0, "train/dfl_loss": 1.0}, cols)
    with pytest.raises(ValueError, match="epoch"):
        write_results_row(tmp_path / "r.csv", {"train/box_loss": 1.0}, cols)


def test_existing_file_with_other_columns_is_not_mixed(tmp_path):
    path = tmp_path / "results.csv"
    write_results_row(path, {"epoch": 0}, results_columns("det"))
    with pytest.raises(ValueError, match="columns"):
        write_results_row(path, {"epoch": 1}, results_columns("seg"))
