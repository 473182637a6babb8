"""Dataset roots as people download them, through the real `lucid` console script.

Each layout is built in a temporary folder from a synthetic YOLO root: an
``images/`` symlinked to a shared store, a Roboflow-style export (``../train/images``
next to ``train/``, ``valid/``, ``test/``), an absolute ``path:`` (to the root
itself and elsewhere), and ``.txt`` list splits. ``lucid data check`` must report
the same image and instance counts as the plain root, and say what it read.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lucidyolo.data.layouts import open_source
from tests.conftest import run_lucid
from tests.task_fields import fields_of

from .conftest import run_data_cli

NAMES = "[circle, square, triangle, hexagon]"


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """A small synthetic YOLO root (8 train + 2 val images of 64 px); never modified."""
    from lucidyolo.data.synth import write_synthetic

    return write_synthetic(tmp_path_factory.mktemp("plain") / "root", fields_of("det"), 10, 64, seed=0, fmt="yolo")


@pytest.fixture(scope="module")
def expected(plain) -> dict[str, tuple[int, int]]:
    """(images, instances) per split of the plain root, read in-process."""
    out = {}
    for split in ("train", "val"):
        src = open_source(plain, split, fields_of("det"))
        out[split] = (len(src), src.num_instances)
    return out


def _check(root: Path, *extra: str) -> dict:
    r = run_data_cli("check", "--data-root", str(root), "--json", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def _counts(rep: dict) -> dict[str, tuple[int, int]]:
    return {s["split"]: (s["images"], s["instances"]) for s in rep["splits"] if s["found"]}


def _split_dirs(plain: Path, split: str, dest: Path) -> None:
    """``dest/images`` + ``dest/labels`` holding one split of the plain root (Roboflow's shape)."""
    shutil.copytree(plain / "images" / split, dest / "images")
    shutil.copytree(plain / "labels" / split, dest / "labels")


def _roboflow(plain: Path, root: Path, header: str = "", names: str = f"nc: 4\nnames: {NAMES}\n") -> Path:
    _split_dirs(plain, "train", root / "train")
    _split_dirs(plain, "val", root / "valid")
    (root / "data.yaml").write_text(
        header + "train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\n" + names
        + "\nroboflow:\n  workspace: someone\n  project: shapes\n  version: 3\n"
    )
    return root


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder`` (links not followed) with size and mtime: proof nothing was written."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            out[os.path.join(dirpath, f)] = (st.st_size, st.st_mtime_ns)
    return out


def test_symlinked_images_folder_is_read_through_the_link(plain, expected, tmp_path):
    shutil.copytree(plain / "images", tmp_path / "store" / "images")
    root = tmp_path / "root"
    root.mkdir()
    (root / "images").symlink_to("../store/images")
    shutil.copytree(plain / "labels", root / "labels")
    shutil.copy(plain / "data.yaml", root / "data.yaml")
    rep = _check(root)
    assert _counts(rep) == expected
    train = rep["splits"][0]
    assert train["layout_description"] == "YOLO, symlinked images"
    assert train["paths"] == [str(root / "images" / "train")]


def test_symlinked_subfolder_inside_a_split_is_followed(plain, expected, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(plain, root)
    moved = tmp_path / "elsewhere"
    imgs = sorted((root / "images" / "train").iterdir())
    moved.mkdir()
    for p in imgs[:3]:
        p.rename(moved / p.name)
    (root / "images" / "train" / "part2").symlink_to(moved)
    (root / "labels" / "train" / "part2").mkdir()
    for p in imgs[:3]:
        (root / "labels" / "train" / f"{p.stem}.txt").rename(root / "labels" / "train" / "part2" / f"{p.stem}.txt")
    rep = _check(root)
    assert _counts(rep) == expected
    assert rep["splits"][0]["layout_description"] == "YOLO, symlinked images"


def test_roboflow_export_resolves_against_the_root(plain, expected, tmp_path):
    root = _roboflow(plain, tmp_path / "export")
    r = run_data_cli("check", "--data-root", str(root))
    assert r.returncode == 0, r.stdout + r.stderr
    flat = " ".join(r.stdout.split())
    assert f"train: YOLO, Roboflow-style export, reading {root / 'train' / 'images'}" in flat
    assert f"val: YOLO, Roboflow-style export, reading {root / 'valid' / 'images'}" in flat
    rep = _check(root)
    assert _counts(rep) == expected and rep["splits"][0]["class_names"][3] == "hexagon"
    # `valid` names the validation split too (the folder's name); no test folder: reported, not fatal to train/val
    rep = _check(root, "--splits", "train,valid")
    assert _counts(rep) == {"train": expected["train"], "valid": expected["val"]}


def test_roboflow_test_split_is_read_when_asked_and_ignored_otherwise(plain, expected, tmp_path):
    root = _roboflow(plain, tmp_path / "export")
    _split_dirs(plain, "val", root / "test")
    rep = _check(root, "--splits", "train,val,test")
    assert _counts(rep) == {**expected, "test": expected["val"]}
    # the yaml names ../test/images but the folder is gone: train/val still check clean
    shutil.rmtree(root / "test")
    assert _counts(_check(root)) == expected
    r = run_data_cli("check", "--data-root", str(root), "--splits", "train,val,test")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "../test/images" in " ".join(r.stderr.split())


def test_yaml_without_a_test_key_reports_test_not_found(plain, expected, tmp_path):
    rep = _check(plain, "--splits", "train,val,test")
    assert [s["found"] for s in rep["splits"]] == [True, True, False] and rep["ok"]


def test_nc_without_names_gets_numbered_class_names(plain, expected, tmp_path):
    root = _roboflow(plain, tmp_path / "export", names="nc: 4\n")
    rep = _check(root)
    assert _counts(rep) == expected
    assert rep["splits"][0]["class_names"] == ["class_0", "class_1", "class_2", "class_3"]


def test_valid_key_and_yml_suffix_are_accepted(plain, expected, tmp_path):
    root = _roboflow(plain, tmp_path / "export")
    (root / "data.yaml").unlink()
    (root / "dataset.yml").write_text(f"train: ../train/images\nvalid: ../valid/images\nnames: {NAMES}\n")
    assert _counts(_check(root)) == expected


def test_absolute_path_naming_the_root_itself_is_silent(plain, expected, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(plain, root)
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames: {NAMES}\n")
    rep = _check(root)
    assert _counts(rep) == expected
    assert all(not s["warnings"] for s in rep["splits"])


def test_absolute_path_elsewhere_is_honoured_with_a_warning(plain, expected, tmp_path):
    data = tmp_path / "disk2" / "shapes"
    shutil.copytree(plain, data)
    cfg = tmp_path / "configs"
    cfg.mkdir()
    (cfg / "shapes.yaml").write_text(f"path: {data}\ntrain: images/train\nval: images/val\nnames: {NAMES}\n")
    rep = _check(cfg)
    assert _counts(rep) == expected
    warned = " ".join(w for s in rep["splits"] for w in s["warnings"])
    assert f"outside its own folder {cfg}" in warned and f"read from {data}" in warned
    assert len(rep["splits"][0]["warnings"]) == 1 and not rep["splits"][1]["warnings"]  # said once


def test_foreign_path_values_are_ignored_with_a_warning(plain, expected, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(plain, root)
    (tmp_path / "datasets" / "shapes").mkdir(parents=True)  # exists, but is not what the user pointed at
    for value, why in (("/home/alice/datasets/shapes", "does not exist here"), ("../datasets/shapes", "leaves the yaml's folder")):
        (root / "data.yaml").write_text(f"path: {value}\ntrain: images/train\nval: images/val\nnames: {NAMES}\n")
        rep = _check(root)
        assert _counts(rep) == expected
        assert why in " ".join(rep["splits"][0]["warnings"]), rep["splits"][0]["warnings"]


def test_list_file_splits_relative_to_the_list_absolute_and_through_a_symlink(plain, expected, tmp_path):
    shutil.copytree(plain / "images", tmp_path / "store" / "images")
    root = tmp_path / "root"
    root.mkdir()
    (root / "images").symlink_to(tmp_path / "store" / "images")
    shutil.copytree(plain / "labels", root / "labels")
    (root / "lists").mkdir()
    train = sorted((root / "images" / "train").iterdir())
    (root / "lists" / "train.txt").write_text("".join(f"../images/train/{p.name}\n" for p in train))  # beside the list
    val = sorted((root / "images" / "val").iterdir())
    (root / "lists" / "val.txt").write_text("# validation\n" + "".join(f"{p}\n" for p in val))  # absolute, inside
    (root / "data.yaml").write_text(f"train: lists/train.txt\nval: [lists/val.txt]\nnames: {NAMES}\n")
    rep = _check(root)
    assert _counts(rep) == expected
    assert rep["splits"][0]["layout_description"] == "YOLO, image list file"
    assert rep["splits"][0]["paths"] == [str(root / "lists" / "train.txt")]


def test_roboflow_coco_export_finds_the_valid_folder(tmp_path, synth):
    coco = synth("det", "coco")
    root = tmp_path / "export"
    for split, folder in (("train", "train"), ("val", "valid")):
        shutil.copytree(coco / split, root / folder)
        shutil.copy(coco / "annotations" / f"instances_{split}.json", root / folder / "_annotations.coco.json")
    rep = _check(root)
    assert [s["layout"] for s in rep["splits"]] == ["coco-export", "coco-export"]
    assert rep["splits"][1]["paths"][0] == str(root / "valid")
    assert rep["splits"][1]["images"] == len(json.loads((root / "valid" / "_annotations.coco.json").read_text())["images"])


def test_paths_leaving_the_root_are_still_refused(plain, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(plain, root)
    shutil.copytree(plain, tmp_path / "other")  # a real sibling dataset: exactly what must not be read silently
    cases = {
        "train: ../other/images/train\n": "'../other/images/train' escapes the dataset root",
        f"train: {tmp_path / 'other' / 'images' / 'train'}\n": "escapes the dataset root",
    }
    for line, needle in cases.items():
        (root / "data.yaml").write_text(f"{line}val: images/val\nnames: {NAMES}\n")
        r = run_data_cli("check", "--data-root", str(root))
        flat = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and "Traceback" not in flat and needle in flat, flat
        assert "absolute `path:`" in flat  # the message says how to read it on purpose
    (root / "train.txt").write_text(f"{tmp_path / 'other' / 'images' / 'train' / '000000.jpg'}\n")
    (root / "data.yaml").write_text(f"train: train.txt\nval: images/val\nnames: {NAMES}\n")
    r = run_data_cli("check", "--data-root", str(root))
    assert r.returncode == 2 and "train.txt:1: image path" in " ".join(r.stderr.split())


@pytest.mark.slow
def test_fit_one_epoch_on_an_export_behind_an_absolute_path_writes_nothing_beside_the_data(plain, expected, tmp_path):
    """One fit covers the layouts together: an absolute `path:` elsewhere, a Roboflow-style
    export whose train images are a symlink into a shared store, `nc` without names."""
    data = tmp_path / "data"
    root = _roboflow(plain, data / "export", names="nc: 4\n")
    (data / "store").mkdir()
    (root / "train" / "images").rename(data / "store" / "train")
    (root / "train" / "images").symlink_to("../../store/train")
    cfg = tmp_path / "configs"
    cfg.mkdir()
    shutil.copy(root / "data.yaml", cfg / "data.yaml")
    with open(cfg / "data.yaml", "a") as f:
        f.write(f"path: {root}\n")

    rep = _check(cfg)
    assert _counts(rep) == expected
    assert rep["splits"][0]["layout_description"] == "YOLO, Roboflow-style export, symlinked images"
    before = _tree(data)
    work = tmp_path / "work"
    work.mkdir()
    r = run_lucid(
        "fit", "det", "--data-root", str(cfg), "--data.img_size", "64", "--data.batch_size", "8",
        "--data.num_workers", "0", "--trainer.max_epochs", "1", "--trainer.default_root_dir", str(work / "runs"),
        env={"LUCIDYOLO_CACHE_DIR": str(work / "cache")}, cwd=work,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    flat = " ".join(r.stdout.split())
    assert f"4 classes, {expected['train'][0]} train / {expected['val'][0]} val images" in flat, r.stdout
    assert f"read from {root}" in " ".join(r.stderr.split())  # the absolute path: is announced
    assert (work / "runs" / "version_0" / "checkpoints" / "last.ckpt").is_file()
    assert _tree(data) == before, "training wrote into the dataset folders"
