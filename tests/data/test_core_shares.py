"""Work on every core: shares come back in order and equal one process doing all of it."""

from __future__ import annotations

import os
import shutil

import pytest

import lucidyolo.data.core_shares as core_shares
from lucidyolo.data.check import scan_images
from lucidyolo.data.core_shares import map_shares
from lucidyolo.data.yolo import orphan_labels, read_yolo


def test_shares_run_in_other_processes_and_come_back_in_order():
    pids = map_shares(lambda a, b: (a, b, os.getpid()), 100, min_items=10, cores=2)
    assert [(a, b) for a, b, _ in pids] == [(0, 13), (13, 26), (26, 39), (39, 52), (52, 65), (65, 78), (78, 91), (91, 100)]
    assert os.getpid() not in {p for *_, p in pids}
    assert map_shares(lambda a, b: (a, b, os.getpid()), 9, min_items=10, cores=2) == [(0, 9, os.getpid())]


def test_a_share_that_raises_raises_in_the_caller():
    def work(a: int, b: int) -> int:
        if a > 0:
            raise ValueError(f"share at {a}")
        return b

    with pytest.raises(ValueError, match="share at"):
        map_shares(work, 40, min_items=1, cores=2)


def test_an_image_scan_on_every_core_equals_one_process(synth, tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=24), root)
    images = sorted((root / "images" / "train").iterdir())
    images[3].write_bytes(images[3].read_bytes()[:-300])  # truncated
    images[11].write_bytes(b"junk")
    monkeypatch.setenv("LUCIDYOLO_LABEL_INDEX", "off")
    try:
        read_yolo(root / "data.yaml", "train", ())
        src = None
    except Exception as exc:  # the junk file is refused by the reader; the rest is what check scans
        src = exc.rest  # type: ignore[attr-defined]
    assert src is not None
    one = scan_images(src)
    monkeypatch.setattr("lucidyolo.data.check.SCAN_SHARES_FROM", 2)
    monkeypatch.setattr(core_shares, "available_cores", lambda: 2)
    shared = scan_images(src)
    assert shared == one
    assert [p for p, _ in one.bad] == [images[3]]


def test_orphan_labels_are_the_label_files_without_an_image(synth, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=12), root)
    labels = root / "labels" / "train"
    (labels / "zz_no_image.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    (labels / "aa_no_image.txt").write_text("")
    (labels / "notes.md").write_text("not a label")
    assert orphan_labels(root / "data.yaml", "train") == [labels / "aa_no_image.txt", labels / "zz_no_image.txt"]
