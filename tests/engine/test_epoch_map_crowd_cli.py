"""The epoch metric scores crowd regions as pycocotools does: equal to `lucid eval` on a COCO root with crowds."""

from __future__ import annotations

import csv
import json

import pytest

pytestmark = pytest.mark.slow

SIZE = 128


def _add_crowds(ann_file) -> int:
    """One crowd region per image of every category, covering the left half (where random boxes fall)."""
    data = json.loads(ann_file.read_text())
    next_id = max(a["id"] for a in data["annotations"]) + 1
    for im in data["images"]:
        for cat in data["categories"]:
            data["annotations"].append({
                "id": next_id, "image_id": im["id"], "category_id": cat["id"], "iscrowd": 1,
                "bbox": [0.0, 0.0, im["width"] / 2, float(im["height"])], "area": im["width"] * im["height"] / 2,
                "segmentation": {"counts": [0], "size": [im["height"], im["width"]]},
            })
            next_id += 1
    ann_file.write_text(json.dumps(data))
    return len(data["images"]) * len(data["categories"])


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_epoch_map_with_crowd_regions_equals_lucid_eval(tmp_path, lucid, precision):
    """Also under bf16-mixed: validation runs in float32 whatever the training precision."""
    from lucidyolo.data.layouts import open_source
    from lucidyolo.data.synth import write_synthetic
    from lucidyolo.tasks.registry import get_task

    fields = get_task("det").fields
    root = write_synthetic(tmp_path / "crowded", fields, 24, SIZE, seed=2, fmt="coco")
    crowds = {split: _add_crowds(root / "annotations" / f"instances_{split}.json") for split in ("train", "val")}
    val = open_source(root, "val", fields)
    assert val.num_ignore_regions == crowds["val"]  # read, flagged, not counted as instances

    fit = lucid("fit", "det", "--data-root", str(root), "--data.img_size", str(SIZE), "--data.batch_size", "8",
                "--trainer.max_epochs", "2", "--data.num_workers", "0", "--optim.lr", "0.04", "--optim.warmup_epochs", "0",
                "--trainer.precision", precision, "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr[-3000:]
    run = tmp_path / "runs" / "version_0"
    with open(run / "results.csv") as f:
        last = list(csv.DictReader(f))[-1]
    # --no-fold: the forward training validated with, bit for bit (BN folding moves float rounding)
    ev = lucid("eval", "--checkpoint", str(run / "checkpoints" / "last.ckpt"), "--img-size", str(SIZE), "--no-fold",
               "--output", str(tmp_path / "report.json"), cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr[-3000:]
    stats = json.loads((tmp_path / "report.json").read_text())["paths"]["e2e"]["bbox"]["stats"]
    assert float(last["metrics/mAP50-95(B)"]) == pytest.approx(stats["AP"], abs=1e-6)
    assert float(last["metrics/mAP50(B)"]) == pytest.approx(stats["AP50"], abs=1e-6)
    assert stats["AP50"] > 0  # a score that can disagree: not two zeros
