"""`lucid fit seg` and `lucid eval` (bbox + segm) on real roots: a YOLO segmentation root and a COCO JSON with crowd RLE."""

from __future__ import annotations

import json

import pytest

from tests.conftest import real_data_root

pytestmark = [pytest.mark.slow, pytest.mark.realdata]


def _pycocotools_stats(ann_file, results_file, iou_type):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt = COCO(str(ann_file))
    e = COCOeval(gt, gt.loadRes(str(results_file)), iou_type)
    e.evaluate()
    e.accumulate()
    e.summarize()
    return list(e.stats)


def test_one_epoch_on_the_coco8_seg_yolo_root(tmp_path, lucid):
    root = real_data_root() / "coco8-seg"
    r = lucid("fit", "seg", "--data-root", str(root), "--trainer.max_epochs", "1", "--data.img_size", "320",
              "--data.batch_size", "4", "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    e = lucid("eval", "--checkpoint", str(ckpt), "--img-size", "320", "--output", str(tmp_path / "report.json"))
    assert e.returncode == 0, e.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["num_images"] == 4
    assert set(report["paths"]["e2e"]) == {"bbox", "segm"} and len(report["paths"]["nms"]["segm"]["stats"]) == 12


def test_one_epoch_on_coco128_coco_and_segm_equals_pycocotools(tmp_path, lucid):
    root = real_data_root() / "coco128_coco"
    # coco128 has only a train split: validate on it too (explicit split names)
    r = lucid("fit", "seg", "--data-root", str(root), "--trainer.max_epochs", "1", "--data.img_size", "320",
              "--data.batch_size", "16", "--data.val_split", "train", "--trainer.limit_train_batches", "4",
              "--trainer.limit_val_batches", "2", "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    out = tmp_path / "eval"
    e = lucid("eval", "--checkpoint", str(ckpt), "--data-root", str(root), "--split", "train", "--img-size", "320",
              "--output", str(out / "report.json"), "--save-json", str(out / "results.json"))
    assert e.returncode == 0, e.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["num_images"] == 128
    ann = root / "annotations" / "instances_train2017.json"
    # the ground truth keeps its crowd RLE regions: pycocotools on the saved file is the reference
    for path, name in (("e2e", "results.json"), ("nms", "results_nms.json")):
        for iou_type in ("bbox", "segm"):
            ours = list(report["paths"][path][iou_type]["stats"].values())
            assert ours == pytest.approx(_pycocotools_stats(ann, out / name, iou_type), abs=1e-12), (path, iou_type)
