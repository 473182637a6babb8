"""COCO / YOLO / DOTA readers agree with each other and store compact arrays."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from lucidyolo.data.layouts import check_same_categories, open_source
from lucidyolo.data.source import ImageSource
from lucidyolo.errors import DataError
from lucidyolo.tasks.keypoints.fields import keypoint_flip_idx
from tests.task_fields import fields_of


@pytest.mark.parametrize("task", ["det", "seg", "obb", "pose"])
def test_coco_and_yolo_writers_read_back_to_the_same_targets(synth, task):
    a = open_source(synth(task, "coco"), "train", fields_of(task))
    b = open_source(synth(task, "yolo"), "train", fields_of(task))
    assert len(a) == len(b) and a.num_instances == b.num_instances > 0
    assert a.class_names == b.class_names
    for i in range(len(a)):
        ta, tb = a.targets(i), b.targets(i)
        ta.validate()
        tb.validate()
        assert np.array_equal(ta.labels, tb.labels)
        # YOLO rows are normalised to 6 decimals; COCO JSON to 2 decimals.
        assert np.allclose(ta.boxes, tb.boxes, atol=0.05)
        if task == "obb":
            assert np.allclose(ta.rboxes[:, :4], tb.rboxes[:, :4], atol=0.05)
        if task == "seg":
            assert np.allclose(ta.polygons.points, tb.polygons.points, atol=0.05)
            assert np.array_equal(ta.polygons.ring_owner, tb.polygons.ring_owner)
        if task == "pose":
            assert np.allclose(ta.keypoints, tb.keypoints, atol=0.05)
            assert np.array_equal(ta.visibility, tb.visibility)


def test_source_holds_only_arrays_after_setup(synth):
    src = open_source(synth("seg", "coco"), "train", fields_of("seg"))
    for name, value in vars(src).items():
        # No per-sample Python containers: lists only for class-level metadata (and the few unreadable
        # files a reader left out under --data.skip_bad_images, empty here).
        if isinstance(value, list):
            assert name in ("class_names", "category_ids", "flip_idx", "unreadable_images"), name
            assert name != "unreadable_images" or value == []
        if isinstance(value, dict):  # only name -> one array per split (per-image targets)
            assert all(isinstance(v, np.ndarray) for v in value.values()), name


def test_targets_returns_fresh_arrays(synth):
    src = open_source(synth("seg", "coco"), "train", fields_of("seg"))
    t = src.targets(0)
    t.boxes += 1000
    t.polygons.points += 1000
    assert np.all(src.targets(0).boxes < 1000)
    assert np.all(src.targets(0).polygons.points < 1000)


def test_pose_flip_pairs_come_from_left_right_names(synth):
    src = open_source(synth("pose", "coco"), "train", fields_of("pose"))
    assert src.meta()["flip_idx"] == [0, 2, 1, 4, 3, 6, 5]
    assert src.meta()["num_keypoints"] == 7
    assert keypoint_flip_idx(["nose", "left_eye", "right_eye", "neck"]) == [0, 2, 1, 3]


def test_category_ids_map_to_contiguous_labels_and_back(tmp_path, synth):
    root = tmp_path / "r"
    shutil.copytree(synth("det", "coco"), root)
    for split in ("train", "val"):
        p = root / "annotations" / f"instances_{split}.json"
        d = json.loads(p.read_text())
        remap = {1: 90, 2: 7, 3: 40, 4: 13}  # sparse, unsorted ids
        for c in d["categories"]:
            c["id"] = remap[c["id"]]
        for a in d["annotations"]:
            a["category_id"] = remap[a["category_id"]]
        p.write_text(json.dumps(d))
    src = open_source(root, "train", fields_of("det"))
    assert src.category_ids == [7, 13, 40, 90]
    assert src.class_names == ["square", "hexagon", "triangle", "circle"]
    orig = open_source(synth("det", "coco"), "train", fields_of("det"))
    names_new = [src.class_names[label] for i in range(len(src)) for label in src.targets(i).labels]
    names_old = [orig.class_names[label] for i in range(len(orig)) for label in orig.targets(i).labels]
    assert names_new == names_old


def test_crowd_annotations_are_not_training_targets(tmp_path, synth):
    root = tmp_path / "r"
    shutil.copytree(synth("det", "coco"), root)
    p = root / "annotations" / "instances_train.json"
    d = json.loads(p.read_text())
    d["annotations"][0]["iscrowd"] = 1
    p.write_text(json.dumps(d))
    assert open_source(root, "train", fields_of("det")).num_instances == open_source(synth("det", "coco"), "train", fields_of("det")).num_instances - 1


def test_boxes_are_clamped_to_the_image(tmp_path, synth):
    root = tmp_path / "r"
    shutil.copytree(synth("det", "coco"), root)
    p = root / "annotations" / "instances_train.json"
    d = json.loads(p.read_text())
    d["annotations"][0]["bbox"] = [-20.0, -5.0, 500.0, 30.0]
    p.write_text(json.dumps(d))
    src = open_source(root, "train", fields_of("det"))
    allb = np.concatenate([src.targets(i).boxes for i in range(len(src))])
    assert allb.min() >= 0 and allb[:, 2].max() <= 128 and allb[:, 3].max() <= 128


@pytest.mark.parametrize("layout", [1, 2])
def test_coco_container_layouts_resolve(synth, layout):
    src = open_source(synth("det", "coco", coco_layout=layout), "val", fields_of("det"))
    assert src.layout == ("coco-2017" if layout == 1 else "coco-split")
    assert len(src) == 2


def test_images_split_and_export_layouts_resolve(tmp_path, synth):
    base = synth("det", "coco")
    a = tmp_path / "a"
    (a / "images").mkdir(parents=True)
    shutil.copytree(base / "val", a / "images" / "val")
    shutil.copytree(base / "annotations", a / "annotations")
    assert open_source(a, "val", fields_of("det")).layout == "coco-images"
    b = tmp_path / "b"
    shutil.copytree(base / "val", b / "val")
    shutil.copy(base / "annotations" / "instances_val.json", b / "val" / "_annotations.coco.json")
    assert open_source(b, "val", fields_of("det")).layout == "coco-export"


def test_explicit_paths_override_the_layout(synth):
    base = synth("det", "coco")
    src = open_source(None, "train", fields_of("det"), train_images=base / "train", train_ann_file=base / "annotations" / "instances_train.json")
    assert len(src) == 8 and src.layout == "coco-explicit"


def test_root_matching_two_conventions_is_refused_unless_layout_given(tmp_path, synth):
    root = tmp_path / "both"
    shutil.copytree(synth("det", "yolo"), root)
    shutil.copytree(synth("det", "coco") / "annotations", root / "annotations")
    (root / "images" / "train").rename(root / "images" / "train_")
    shutil.copytree(synth("det", "coco") / "train", root / "images" / "train")
    with pytest.raises(DataError, match="several dataset conventions"):
        open_source(root, "train", fields_of("det"))
    assert open_source(root, "train", fields_of("det"), layout="coco").layout == "coco-images"


def test_root_matching_nothing_lists_what_was_looked_for(tmp_path):
    (tmp_path / "stuff").mkdir()
    with pytest.raises(DataError) as e:
        open_source(tmp_path, "train", fields_of("det"))
    msg = str(e.value)
    assert "train2017/ + annotations/instances_train2017.json" in msg
    assert "data.yaml" in msg and "labelTxt" in msg


def test_pose_resolves_person_keypoints_by_convention(synth):
    src = open_source(synth("pose", "coco", coco_layout=1), "train", fields_of("pose"))
    assert src.ann_file.name == "person_keypoints_train2017.json"


def test_train_and_val_with_different_categories_are_refused(tmp_path, synth):
    root = tmp_path / "r"
    shutil.copytree(synth("det", "coco"), root)
    p = root / "annotations" / "instances_val.json"
    d = json.loads(p.read_text())
    d["categories"][0]["name"] = "ball"
    p.write_text(json.dumps(d))
    train, val = (open_source(root, s, fields_of("det")) for s in ("train", "val"))
    with pytest.raises(DataError, match="different categories"):
        check_same_categories(train, val)


def test_yolo_names_as_list_and_txt_split_and_missing_label_is_background(tmp_path, synth):
    root = tmp_path / "y"
    shutil.copytree(synth("det", "yolo"), root)
    imgs = sorted((root / "images" / "train").iterdir())
    (root / "train.txt").write_text("".join(f"./images/train/{p.name}\n" for p in imgs[:3]))
    (root / "labels" / "train" / f"{imgs[0].stem}.txt").unlink()
    (root / "data.yaml").write_text("train: train.txt\nval: [images/val]\nnames: [circle, square, triangle, hexagon]\n")
    src = open_source(root, "train", fields_of("detect"))
    assert len(src) == 3
    assert len(src.targets(0)) == 0
    assert isinstance(src, ImageSource) and src.class_names[3] == "hexagon"


def test_yolo_obb_corners_slightly_outside_are_clipped(tmp_path, synth):
    root = tmp_path / "o"
    shutil.copytree(synth("obb", "yolo"), root)
    lab = sorted((root / "labels" / "train").iterdir())[0]
    lab.write_text("2 -0.02 0.10 0.30 0.10 0.30 0.20 -0.02 0.20\n")
    t = open_source(root, "train", fields_of("obb")).targets(0)
    assert t.boxes[0, 0] == 0 and np.isclose(t.rboxes[0, 2], 0.30 * 128, atol=1e-3)
