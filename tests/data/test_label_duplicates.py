"""A label file of 100k identical rows read without a word; `data check` and `fit` now warn, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucidyolo.data.label_duplicates import duplicate_rows_per_image
from lucidyolo.data.layouts import open_source
from tests.conftest import run_lucid
from tests.faults import fast_fit_args
from tests.task_fields import fields_of

ROWS = 100_000


def _root(out: Path) -> tuple[Path, Path]:
    """A tiny YOLO det root whose first training label file holds ``ROWS`` copies of one row (and one other row)."""
    from lucidyolo.data.synth import write_synthetic

    root = write_synthetic(out, fields_of("det"), 10, img_size=64, seed=0, fmt="yolo", val_fraction=0.2)
    label = sorted((root / "labels" / "train").glob("*.txt"))[0]
    label.write_text("0 0.5 0.5 0.2 0.2\n" * ROWS + "1 0.3 0.3 0.1 0.1\n")
    return root, label


def test_duplicate_rows_are_counted_per_image(tmp_path):
    root, _ = _root(tmp_path / "data")
    dupes = duplicate_rows_per_image(open_source(root, "train", fields_of("det")))
    assert dupes[0] == ROWS - 1 and dupes[1:].sum() == 0


def test_data_check_warns_naming_the_file_and_the_count(tmp_path):
    root, label = _root(tmp_path / "data")
    r = run_lucid("data", "check", "--data-root", str(root), cwd=tmp_path)
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, out[-3000:]
    assert f"{label} ({ROWS - 1} duplicate rows)" in out


@pytest.mark.slow
def test_fit_warns_at_start_naming_the_file_and_the_count(tmp_path):
    root, label = _root(tmp_path / "data")
    # a class count that does not match stops the start right after the data warnings: no training needed
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.num_classes", "99", cwd=tmp_path)
    assert r.returncode == 2 and "model.num_classes" in r.stderr, r.stderr[-3000:]
    assert f"{label} ({ROWS - 1} duplicate rows)" in " ".join(r.stdout.split())
