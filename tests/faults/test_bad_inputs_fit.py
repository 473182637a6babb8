"""`lucid fit` on roots with missing labels or bad image files, through the console script.

A YOLO root copied without its ``labels/`` folder trained to the end with
``loss box 0`` and mAP 0 and said "done"; one corrupt image stopped a whole run
after set-up and there was no way to train on the rest.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import fast_fit_args
from tests.task_fields import fields_of


def _yolo_root(out: Path, images: int = 10) -> Path:
    from lucidyolo.data.synth import write_synthetic

    return write_synthetic(out, fields_of("det"), images, img_size=64, seed=0, fmt="yolo", val_fraction=0.2)


def test_a_yolo_root_without_its_labels_folder_is_refused_naming_where_labels_were_looked_for(tmp_path):
    root = _yolo_root(tmp_path / "data")
    shutil.rmtree(root / "labels")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), cwd=tmp_path)
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"None of the 8 train images has a label file: they were looked for under {root / 'labels' / 'train'}" in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


@pytest.mark.slow
def test_a_mostly_unlabelled_split_warns_with_the_count_and_trains(tmp_path):
    root = _yolo_root(tmp_path / "data")
    for label in sorted((root / "labels" / "train").glob("*.txt"))[:5]:
        label.unlink()
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = " ".join(r.stdout.split())
    assert f"warning: 5 of 8 train images have no label file under {root / 'labels' / 'train'}" in out


@pytest.mark.slow
def test_skip_bad_images_trains_on_the_rest_and_lists_what_it_left_out(tmp_path):
    root = _yolo_root(tmp_path / "data")
    images = sorted((root / "images" / "train").glob("*.jpg"))
    images[0].write_bytes(b"garbage, not a JPEG")  # the reader cannot read its header
    data = images[1].read_bytes()
    images[1].write_bytes(data[: len(data) // 2])  # truncated: header fine, no end-of-image marker
    plain = run_lucid(*fast_fit_args("det", root, tmp_path / "plain"), cwd=tmp_path)
    err = " ".join(plain.stderr.split())
    assert plain.returncode == 2 and str(images[0]) in err and "--data.skip_bad_images true" in err, err[-2000:]

    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--data.skip_bad_images", "true", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = tmp_path / "runs" / "version_0"
    assert "6 train / 2 val images" in r.stdout
    assert f"left out 2 train image file(s) that cannot be used; each is listed with its reason in {run_dir / 'bad_images.txt'}" in " ".join(r.stdout.split())
    rows = [line.split("\t") for line in (run_dir / "bad_images.txt").read_text().splitlines()]
    assert [(split, path) for split, path, _ in rows] == [("train", str(images[0])), ("train", str(images[1]))]
    assert "truncated" in rows[1][2]
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
