"""Every dataset in ../shared/data reads with the counts its README gives (and the files hold)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lucidyolo.data.check import check_dataset
from lucidyolo.data.layouts import open_source
from tests.task_fields import fields_of

from ..conftest import real_data_root

ROOT = real_data_root()
pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(ROOT is None, reason="real sample data (../shared/data or LUCID_REAL_DATA) is absent"),
]
GOLDEN = json.loads((Path(__file__).with_name("realdata_counts.json")).read_text())


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_real_dataset_counts(key):
    g = GOLDEN[key]
    src = open_source(ROOT / g["root"], g["split"], fields_of(g["task"]))
    assert len(src) == g["images"]
    assert src.num_instances == g["instances"]
    assert src.num_classes == g["classes"]
    assert int((src.instances_per_image() == 0).sum()) == g["background"]
    for i in range(len(src)):
        t = src.targets(i)
        t.validate()
        h, w = src.image_hw(i)
        assert t.boxes.min(initial=0) >= 0 and np.all(t.boxes[:, 2] <= w) and np.all(t.boxes[:, 3] <= h)
        if t.rboxes is not None:
            assert np.all(t.rboxes[:, 2] >= t.rboxes[:, 3])
            assert np.all((t.rboxes[:, 4] >= -np.pi / 4) & (t.rboxes[:, 4] < 3 * np.pi / 4))


def test_coco_json_instances_equal_non_crowd_annotations():
    for name in ("coco128_coco", "coco_mini_train"):
        d = json.loads((ROOT / name / "annotations" / "instances_train2017.json").read_text())
        non_crowd = sum(1 for a in d["annotations"] if not a["iscrowd"] and a["bbox"][2] > 0 and a["bbox"][3] > 0)
        assert open_source(ROOT / name, "train", fields_of("det")).num_instances == non_crowd


def test_yolo_instances_equal_label_rows():
    for name, task in (("coco8", "det"), ("coco8-seg", "seg"), ("coco8-pose", "pose"), ("dota8", "obb")):
        for split in ("train", "val"):
            rows = sum(len([ln for ln in p.read_text().splitlines() if ln.strip()]) for p in (ROOT / name / "labels" / split).glob("*.txt"))
            assert open_source(ROOT / name, split, fields_of(task)).num_instances == rows


def test_dota_scenes_keep_every_row_and_the_difficult_flag():
    src = open_source(ROOT / "dota_v1_examples", "train", fields_of("obb"))
    rows = diff = 0
    for p in (ROOT / "dota_v1_examples" / "labelTxt").glob("*.txt"):
        for ln in p.read_text().splitlines():
            toks = ln.split()
            if len(toks) == 10:
                rows += 1
                diff += toks[9] == "1"
    assert src.num_instances == rows
    assert sum(int(src.targets(i).difficult.sum()) for i in range(len(src))) == diff
    p0706 = [i for i in range(len(src)) if src.image_path(i).stem == "P0706"][0]
    assert len(src.targets(p0706)) == 536


def test_coco_mini_pose_has_17_keypoints_and_coco_flip_pairs():
    src = open_source(ROOT / "coco_mini_train", "train", fields_of("pose"))
    assert src.meta()["num_keypoints"] == 17
    assert src.meta()["flip_idx"] == [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]


@pytest.mark.parametrize("name", ["coco8", "coco8-seg", "coco8-pose", "dota8", "coco128_coco", "coco_mini_train", "dota_v1_examples"])
def test_check_passes_on_every_real_dataset(name):
    rep = check_dataset(ROOT / name)
    assert rep.ok, rep.to_dict()
