"""A directory symlink loop in a YOLO split, through the real console script (issue 45, defect 2).

``images/train/loopdir -> ..`` made the scan walk ``images/`` and train on the
val images as unlabelled backgrounds (``fit`` reported 80 train / 16 val);
broken and self links were dropped without a word. The loop, a link into val,
a broken and a self link are now skipped and named; a shared store reached
through a link is still read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import fast_fit_args
from tests.faults.matrix import record
from tests.task_fields import fields_of

TRAIN, VAL = 9, 3


def _root(tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    """A 64 px YOLO det set (9 train + 3 val) whose train folder holds every kind of link; the skipped ones."""
    from lucidyolo.data.synth import write_synthetic

    root = write_synthetic(tmp_path / "data", fields_of("det"), TRAIN + VAL, 64, seed=0, fmt="yolo", val_fraction=0.25)
    train = root / "images" / "train"
    # two train images move to a store outside the root and come back through a link: still read
    store = tmp_path / "store"
    (store / "images").mkdir(parents=True)
    (store / "labels").mkdir()
    for img in sorted(train.glob("*.jpg"))[:2]:
        img.rename(store / "images" / img.name)
        (root / "labels" / "train" / f"{img.stem}.txt").rename(store / "labels" / f"{img.stem}.txt")
    (train / "shared").symlink_to(store / "images")
    (root / "labels" / "train" / "shared").symlink_to(store / "labels")
    (train / "loopdir").symlink_to("..")
    (train / "peek").symlink_to("../val")
    (train / "gone.jpg").symlink_to("nowhere.jpg")
    (train / "self").symlink_to("self")
    skipped = [("gone.jpg", "broken link"), ("loopdir", "loop"), ("peek", "into split 'val'"), ("self", "loop")]
    return root, [(str(train / name), why) for name, why in skipped]


def _said(text: str, skipped: list[tuple[str, str]]) -> bool:
    flat = " ".join(text.split())
    listed = ", ".join(f"{p} ({why})" for p, why in skipped)
    return f"{len(skipped)} symbolic link(s) below the train split's folder were skipped: {listed}." in flat


def test_data_check_names_the_skipped_links_and_counts_train_without_val(tmp_path):
    root, skipped = _root(tmp_path)
    r = run_lucid("data", "check", "--data-root", str(root), "--json", cwd=tmp_path)
    rep = json.loads(r.stdout) if r.returncode == 0 else {"splits": []}
    counts = {s["split"]: s["images"] for s in rep["splits"]}
    train = next((s for s in rep["splits"] if s["split"] == "train"), {"warnings": [], "layout_description": ""})
    shown = run_lucid("data", "check", "--data-root", str(root), cwd=tmp_path)  # what a user reads
    ok = (r.returncode == 0 and counts == {"train": TRAIN, "val": VAL}
          and any(_said(w, skipped) for w in train["warnings"])
          and train["layout_description"] == "YOLO, symlinked images"  # the store's link was followed
          and shown.returncode == 0 and _said(shown.stdout, skipped))
    record("data check", "symlink loop", r.returncode, ok)
    assert ok, f"rc {r.returncode}, counts {counts}, train {train}\n{shown.stdout}\n{r.stderr[-2000:]}"


@pytest.mark.slow
def test_fit_trains_on_the_train_images_only_and_says_which_links_it_skipped(tmp_path):
    root, skipped = _root(tmp_path)
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--data.num_workers", "0", cwd=tmp_path)
    out = " ".join(r.stdout.split())
    # one `warning:` line of lucid's, not Python's `file.py:195: UserWarning:` with the source line repeated
    ok = (r.returncode == 0 and f"{TRAIN} train / {VAL} val images" in out and _said(r.stderr, skipped)
          and "Traceback" not in r.stderr and "UserWarning" not in r.stderr
          and "warning: 4 symbolic link(s) below the train split's folder were skipped" in " ".join(r.stderr.split()))
    record("fit det", "symlink loop", r.returncode, ok)
    assert ok, f"rc {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
