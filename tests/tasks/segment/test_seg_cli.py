"""`lucid fit seg` -> eval (bbox + segm, both decode paths) -> predict -> export, through the real console script."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TINY = ("--trainer.max_epochs", "2", "--data.synthetic_images", "24", "--data.img_size", "128",
        "--data.batch_size", "8", "--data.num_workers", "0")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.conftest import run_lucid

    base = tmp_path_factory.mktemp("fitseg")
    env = {"LUCIDYOLO_CACHE_DIR": str(base / "cache")}
    r = run_lucid("fit", "seg", *TINY, "--trainer.default_root_dir", str(base / "runs"), env=env, cwd=base)
    assert r.returncode == 0, r.stderr[-3000:]
    return {"base": base, "env": env, "ckpt": base / "runs" / "version_0" / "checkpoints" / "last.ckpt",
            "run_dir": base / "runs" / "version_0", "stdout": r.stdout}


def test_fit_logs_mask_terms_and_metrics(run):
    with open(run["run_dir"] / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    for col in ("train/mask_loss", "train/semantic_loss", "val/mask_loss", "metrics/mAP50(B)", "metrics/mAP50-95(M)",
                "metrics/mAP50(M)", "metrics/precision(B)", "metrics/recall(B)", "metrics/precision(M)",
                "metrics/recall(M)"):
        assert col in rows[0] and rows[-1][col] != "", col
    from tests.engine.curve_files import assert_curve_files

    for key in ("box", "mask"):  # boxes and masks, each from its own matching
        assert_curve_files(run["run_dir"], key)
    assert float(rows[-1]["train/mask_loss"]) > 0
    import torch

    ckpt = torch.load(run["ckpt"], weights_only=True)
    assert ckpt["lucid"]["config"]["model"]["task"] == "seg"
    assert any(k.endswith("protos.semseg.2.weight") for k in ckpt["state_dict"])  # trained with the auxiliary head


def test_eval_segm_equals_pycocotools_on_the_saved_json(run, lucid):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    out = run["base"] / "eval"
    r = lucid("eval", "--checkpoint", str(run["ckpt"]), "--img-size", "128", "--output", str(out / "report.json"),
              "--save-json", str(out / "results.json"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "seg"
    ann = next(Path(report["data_root"]).glob("annotations/instances_val*.json"))
    for path, name in (("e2e", "results.json"), ("nms", "results_nms.json")):
        saved = json.loads((out / name).read_text())
        assert saved and all("segmentation" in d for d in saved)
        for iou_type in ("bbox", "segm"):
            gt = COCO(str(ann))
            e = COCOeval(gt, gt.loadRes(str(out / name)), iou_type)
            e.evaluate()
            e.accumulate()
            e.summarize()
            ours = list(report["paths"][path][iou_type]["stats"].values())
            assert ours == pytest.approx(list(e.stats), abs=1e-12), (path, iou_type)


def test_eval_without_masks_scores_boxes_only(run, lucid):
    out = run["base"] / "eval_boxes"
    r = lucid("eval", "--checkpoint", str(run["ckpt"]), "--img-size", "128", "--option", "masks=false",
              "--output", str(out / "report.json"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["paths"]["e2e"]) == {"bbox"}


def test_predict_writes_rle_masks_and_drawings(run, lucid):
    from pycocotools import mask as mask_utils

    data_root = next((run["base"] / "cache" / "synthetic").iterdir())
    out = run["base"] / "pred"
    r = lucid("predict", "--checkpoint", str(run["ckpt"]), "--source", str(data_root / "val"), "--conf", "0.001",
              "--save", str(out / "drawn"), "--output", str(out / "pred.json"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    pred = json.loads((out / "pred.json").read_text())
    first = pred["images"][0]
    assert first["predictions"], "an untrained model still scores above 0.001 somewhere"
    for p in first["predictions"]:
        m = mask_utils.decode(p["mask"])
        assert m.shape == (first["height"], first["width"])
        ys, xs = m.nonzero()
        if len(xs):  # the mask is cropped to its box (original pixels, pixel centres)
            x1, y1, x2, y2 = p["box"]
            assert xs.min() + 0.5 >= x1 - 1e-6 and xs.max() + 0.5 <= x2 + 1e-6
            assert ys.min() + 0.5 >= y1 - 1e-6 and ys.max() + 0.5 <= y2 + 1e-6
    assert len(list((out / "drawn").glob("*.jpg"))) == len(pred["images"])


def test_export_onnx_with_prototypes_passes_the_parity_check(run, lucid):
    import onnx

    out = run["base"] / "model.onnx"
    r = lucid("export", "--checkpoint", str(run["ckpt"]), "--format", "onnx", "--img-size", "128", "--check",
              "--output", str(out), env=run["env"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    graph = onnx.load(str(out)).graph
    assert [o.name for o in graph.output] == ["detections", "coeffs", "protos"]
    ops = {n.op_type for n in graph.node}
    assert "TopK" in ops and "NonMaxSuppression" not in ops


def test_fit_writes_batch_pictures_drawn_by_the_task(run):
    """Training batches with their masks, validation batches with labels and predictions: whole JPEGs."""
    from tests.engine.batch_pictures import batch_picture_sizes, expected_batch_pictures

    sizes = batch_picture_sizes(run["run_dir"])
    assert set(sizes) == expected_batch_pictures(run["stdout"], batch_size=8)
    assert all(min(size) >= 128 for size in sizes.values())  # at least one 128 px tile each
