"""Bad input reaches the user as `file:line` + exit 2 through the real console script, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import run_data_cli


def _yolo_copy(synth, tmp_path: Path, task: str = "det") -> Path:
    root = tmp_path / "root"
    shutil.copytree(synth(task, "yolo"), root)
    return root


def _first_label(root: Path) -> Path:
    return sorted((root / "labels" / "train").iterdir())[0]


def _check_fails(root: Path, *needles: str, task: str | None = None) -> str:
    args = ["check", "--data-root", str(root)] + (["--task", task] if task else [])
    r = run_data_cli(*args)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "Traceback" not in out, out
    flat = " ".join(out.split())
    for n in needles:
        assert n in flat, (n, out)
    return out


def test_class_id_out_of_range_names_file_and_line(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    lab = _first_label(root)
    lab.write_text(lab.read_text() + "7 0.5 0.5 0.1 0.1\n")
    n = len(lab.read_text().splitlines())
    _check_fails(root, f"{lab.name}:{n}", "class id 7 is out of range")


def test_nan_coordinate_is_refused(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    lab = _first_label(root)
    lab.write_text("0 nan 0.5 0.1 0.1\n")
    _check_fails(root, f"{lab.name}:1", "NaN")


def test_negative_size_is_refused(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    lab = _first_label(root)
    lab.write_text("0 0.5 0.5 -0.1 0.1\n")
    _check_fails(root, f"{lab.name}:1", "negative box size")


def test_wrong_field_count_is_refused(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path, "obb")
    lab = _first_label(root)
    lab.write_text("0 0.1 0.1 0.2 0.1 0.2\n")
    _check_fails(root, f"{lab.name}:1", "row has 6 fields")


def test_label_for_a_missing_image_is_reported(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    (root / "labels" / "train" / "ghost.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    _check_fails(root, "ghost.txt:1", "no image")


def test_truncated_image_is_reported(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    img = sorted((root / "images" / "train").iterdir())[1]
    data = img.read_bytes()
    img.write_bytes(data[: len(data) // 2])
    _check_fails(root, img.name, "truncated")


def test_non_image_file_is_reported(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    img = sorted((root / "images" / "train").iterdir())[2]
    img.write_text("this is not a jpeg")
    _check_fails(root, img.name, "not a readable image")


def test_yaml_path_escaping_the_root_is_refused(synth, tmp_path):
    root = _yolo_copy(synth, tmp_path)
    (root / "data.yaml").write_text("train: ../../etc\nval: images/val\nnames: [a, b, c, d]\n")
    _check_fails(root, "escapes the dataset root")


def test_empty_dataset_is_refused(tmp_path):
    root = tmp_path / "empty"
    (root / "images" / "train").mkdir(parents=True)
    (root / "data.yaml").write_text("train: images/train\nval: images/train\nnames: [a]\n")
    _check_fails(root, "contains no images")


def test_dota_sixteenth_class_fails_naming_file_and_line(tmp_path, synth):
    root = tmp_path / "dota"
    (root / "train" / "images").mkdir(parents=True)
    (root / "train" / "labelTxt").mkdir(parents=True)
    shutil.copy(sorted((synth("obb", "yolo") / "images" / "train").iterdir())[0], root / "train" / "images" / "P0001.jpg")
    (root / "train" / "labelTxt" / "P0001.txt").write_text(
        "imagesource:GoogleEarth\ngsd:0.5\n10 10 40 10 40 30 10 30 plane 0\n10 10 40 10 40 30 10 30 container-crane 0\n"
    )
    _check_fails(root, "P0001.txt:4", "container-crane", "15 DOTA-v1.0 classes")


def test_coco_annotation_with_nan_box_is_refused(tmp_path, synth):
    root = tmp_path / "c"
    shutil.copytree(synth("det", "coco"), root)
    p = root / "annotations" / "instances_train.json"
    d = json.loads(p.read_text())
    d["annotations"][0]["bbox"][2] = float("nan")
    p.write_text(json.dumps(d))
    _check_fails(root, "instances_train.json", "NaN")


def test_coco_image_missing_on_disk_is_refused(tmp_path, synth):
    root = tmp_path / "c"
    shutil.copytree(synth("det", "coco"), root)
    (root / "train" / "000003.jpg").unlink()
    _check_fails(root, "000003.jpg", "does not exist")


def test_missing_root_is_a_user_error():
    r = run_data_cli("check", "--data-root", "/nonexistent/lucid/root")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "does not exist" in r.stderr


@pytest.mark.parametrize("task", ["det", "keypoints"])
def test_good_root_checks_ok_and_json_reports_counts(synth, task):
    r = run_data_cli("check", "--data-root", str(synth(task, "yolo")), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["task"] == task
    assert [s["images"] for s in rep["splits"]] == [8, 2]
    assert rep["model.num_classes"] == (1 if task == "keypoints" else 4)
    assert sum(rep["splits"][0]["instances_per_class"].values()) == rep["splits"][0]["instances"]
