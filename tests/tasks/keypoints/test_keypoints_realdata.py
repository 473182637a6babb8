"""`lucid fit keypoints` and `lucid eval` (bbox + OKS keypoints) on real roots: a YOLO pose root and COCO person_keypoints JSON."""

from __future__ import annotations

import json

import pytest

from tests.conftest import real_data_root

ROOT = real_data_root()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.realdata,
    pytest.mark.skipif(ROOT is None, reason="real sample data (../shared/data or LUCID_REAL_DATA) is absent"),
]

KEYPOINT_STATS = ["AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"]


def _pycocotools_stats(gt, results_file, iou_type):
    """Plain pycocotools on a results file; ``gt`` is an annotation file path or a COCO GT dict."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if isinstance(gt, dict):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
    else:
        coco = COCO(str(gt))
    e = COCOeval(coco, coco.loadRes(str(results_file)), iouType=iou_type)
    e.evaluate()
    e.accumulate()
    e.summarize()
    return list(e.stats)


def _check_saved_results(path, image_ids):
    saved = json.loads(path.read_text())
    assert saved, f"{path} is empty"
    assert {d["image_id"] for d in saved} <= set(image_ids)
    assert all(len(d["keypoints"]) == 3 * 17 and len(d["bbox"]) == 4 for d in saved)


def test_one_epoch_on_coco8_pose_and_eval_equals_pycocotools(tmp_path, lucid):
    from lucidyolo.data.coco_gt import build_coco_gt
    from lucidyolo.data.layouts import open_source
    from lucidyolo.tasks.registry import get_task

    root = ROOT / "coco8-pose"
    if not root.is_dir():
        pytest.skip(f"{root} is absent")
    # no --model.num_keypoints: 'auto' reads kpt_shape [17, 3] from the root's yaml
    r = lucid("fit", "keypoints", "--data-root", str(root), "--trainer.max_epochs", "1", "--data.img_size", "256",
              "--data.batch_size", "4", "--data.num_workers", "0", "--trainer.default_root_dir", str(tmp_path / "runs"),
              cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    out = tmp_path / "eval"
    e = lucid("eval", "--checkpoint", str(ckpt), "--img-size", "256", "--output", str(out / "report.json"),
              "--save-json", str(out / "results.json"))
    assert e.returncode == 0, e.stderr[-3000:]
    assert "(keypoints)" in e.stdout and "(bbox)" in e.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "keypoints" and report["num_images"] == 4
    assert report["config"]["model"]["num_keypoints"] == "auto"
    source = open_source(root, "val", get_task("keypoints").fields)
    gt = build_coco_gt(source)  # a YOLO root has no annotation file: the dict lucid scores against
    assert all(len(a["keypoints"]) == 3 * 17 for a in gt["annotations"])
    for path, name in (("e2e", "results.json"), ("nms", "results_nms.json")):
        assert set(report["paths"][path]) == {"bbox", "keypoints"}
        assert list(report["paths"][path]["keypoints"]["stats"]) == KEYPOINT_STATS
        assert len(report["paths"][path]["bbox"]["stats"]) == 12
        _check_saved_results(out / name, [im["id"] for im in gt["images"]])
        for iou_type in ("bbox", "keypoints"):
            ours = list(report["paths"][path][iou_type]["stats"].values())
            assert ours == pytest.approx(_pycocotools_stats(gt, out / name, iou_type), abs=1e-12), (path, iou_type)


def test_one_epoch_on_coco_mini_person_keypoints_json_and_eval(tmp_path, lucid):
    root = ROOT / "coco_mini_train"
    if not root.is_dir():
        pytest.skip(f"{root} is absent")
    # only a train split: validate on it too; the keypoint task reads person_keypoints_train2017.json
    r = lucid("fit", "keypoints", "--data-root", str(root), "--trainer.max_epochs", "1", "--data.img_size", "256",
              "--data.batch_size", "4", "--data.num_workers", "0", "--data.val_split", "train",
              "--trainer.limit_train_batches", "4", "--trainer.limit_val_batches", "2",
              "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    import torch

    assert torch.load(ckpt, weights_only=True)["lucid"]["dataset_meta"]["num_keypoints"] == 17
    out = tmp_path / "eval"
    e = lucid("eval", "--checkpoint", str(ckpt), "--split", "train", "--img-size", "256",
              "--output", str(out / "report.json"), "--save-json", str(out / "results.json"))
    assert e.returncode == 0, e.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "keypoints" and report["num_images"] == 80
    ann = root / "annotations" / "person_keypoints_train2017.json"
    image_ids = [im["id"] for im in json.loads(ann.read_text())["images"]]
    # the official file (crowd regions, num_keypoints = 0 persons) is the reference
    for path, name in (("e2e", "results.json"), ("nms", "results_nms.json")):
        assert list(report["paths"][path]["keypoints"]["stats"]) == KEYPOINT_STATS
        _check_saved_results(out / name, image_ids)
        for iou_type in ("bbox", "keypoints"):
            ours = list(report["paths"][path][iou_type]["stats"].values())
            assert ours == pytest.approx(_pycocotools_stats(ann, out / name, iou_type), abs=1e-12), (path, iou_type)
