"""A training split without labels is refused; a mostly unlabelled one warns (unit and `lucid data check`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lucidyolo.data.label_coverage import check_label_coverage
from lucidyolo.data.layouts import open_source
from lucidyolo.data.source import ImageSource
from lucidyolo.errors import DataError
from tests.task_fields import fields_of

from .conftest import run_data_cli

DET = fields_of("det")


def _yolo(synth, tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=10, size=32), root)  # 8 train images, each labelled
    return root


def _drop_labels(root: Path, k: int) -> None:
    for p in sorted((root / "labels" / "train").iterdir())[:k]:
        p.unlink()


def test_yolo_root_without_labels_folder_is_refused_naming_it(synth, tmp_path):
    root = _yolo(synth, tmp_path)
    shutil.rmtree(root / "labels")
    with pytest.raises(DataError) as e:
        check_label_coverage(open_source(root, "train", DET), "train")
    assert e.value.what == f"None of the 8 train images has a label file: they were looked for under {root / 'labels' / 'train'}."
    assert e.value.fix and str(root / "labels" / "train") in e.value.fix


def test_yolo_with_only_empty_label_files_is_refused_too(synth, tmp_path):
    root = _yolo(synth, tmp_path)
    for p in (root / "labels" / "train").iterdir():
        p.write_text("")
    with pytest.raises(DataError, match="has no labelled instance: none of its 8 images"):
        check_label_coverage(open_source(root, "train", DET), "train")


def test_mostly_missing_label_files_warn_with_the_count(synth, tmp_path):
    root = _yolo(synth, tmp_path)
    _drop_labels(root, 5)  # 5 of 8 > half
    got = check_label_coverage(open_source(root, "train", DET), "train")
    assert got == f"5 of 8 train images have no label file under {root / 'labels' / 'train'}; they train as background."
    root2 = _yolo(synth, tmp_path / "b")
    _drop_labels(root2, 4)  # exactly half: not "most"
    assert check_label_coverage(open_source(root2, "train", DET), "train") is None


def test_coco_split_without_annotations_names_the_json(synth, tmp_path):
    root = tmp_path / "c"
    shutil.copytree(synth("det", "coco", n=10, size=32), root)
    ann = root / "annotations" / "instances_train.json"
    doc = json.loads(ann.read_text())
    doc["annotations"] = []
    ann.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=f"none of its 8 images has a label in {ann}"):
        check_label_coverage(open_source(root, "train", DET), "train")


def test_per_image_class_targets_are_exempt(tmp_path):
    src = ImageSource(
        fields=(), class_names=["a", "b"], category_ids=[0, 1], root=tmp_path,
        rel_paths=np.array([b"x.jpg", b"y.jpg"]), image_ids=np.arange(2), hw=np.full((2, 2), 8),
        inst_offsets=np.zeros(3, np.int64), boxes=np.zeros((0, 4)), labels=np.zeros(0, np.int64),
        difficult=np.zeros(0, bool), image_extra={"class_id": np.array([0, 1])},
    )  # fmt: skip
    assert src.num_instances == 0 and src.image_class_counts() is not None
    assert check_label_coverage(src, "train") is None


def test_check_refuses_a_labels_less_train_split_and_warns_when_mostly_unlabelled(synth, tmp_path):
    root = _yolo(synth, tmp_path)
    shutil.rmtree(root / "labels" / "train")
    r = run_data_cli("check", "--data-root", str(root))
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2 and "Traceback" not in out, out
    assert f"error (train): None of the 8 train images has a label file: they were looked for under {root / 'labels' / 'train'}" in out

    root2 = _yolo(synth, tmp_path / "b")
    _drop_labels(root2, 6)
    r = run_data_cli("check", "--data-root", str(root2))
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, out
    assert f"warning (train): 6 of 8 train images have no label file under {root2 / 'labels' / 'train'}; they train as background." in out
