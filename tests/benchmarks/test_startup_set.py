"""The start-up benchmark's set is a YOLO root lucid reads whole, made once per size."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from lucidyolo.data.yolo import read_yolo

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "startup.py"


def _startup():
    spec = importlib.util.spec_from_file_location("startup", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_set_has_every_image_labelled_and_is_not_made_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("LUCIDYOLO_LABEL_INDEX", "off")
    startup = _startup()
    yaml = startup.make_set(tmp_path / "set", 30, 5)
    train = read_yolo(yaml, "train", ())
    assert len(train) == 30 and train.images_without_label_file == 0
    assert 30 <= train.num_instances <= 90  # 1 to 3 boxes per image
    assert len(read_yolo(yaml, "val", ())) == 5
    marker = tmp_path / "set" / ".complete"
    before = marker.stat().st_mtime_ns
    startup.make_set(tmp_path / "set", 30, 5)
    assert marker.stat().st_mtime_ns == before


def test_the_reference_has_stepped_once_its_first_epoch_bar_shows_a_finished_batch():
    startup = _startup()
    bar = "\x1b[K        1/1         0G      2.719      4.729    0.03803         20         64: 0% ──── {}/15000 {}it/s 0.5s<2:00:00"
    assert not startup.reference_stepped(bar.format(0, "0.0"))
    assert startup.reference_stepped("scanning...\r" + bar.format(1, "2.1"))
    assert not startup.reference_stepped("   Class     Images  Instances      Box(P: 100% ━━━━━━━━━━━━ 1/1 4.9it/s 0.2s")
    assert startup.lucid_stepped("lucid fit det: ...\nfirst training step done 0.3 s after the fit started\n")
