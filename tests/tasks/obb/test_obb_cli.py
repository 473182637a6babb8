"""`lucid fit obb` on a synthetic root of rotated rectangles -> predict -> export -> eval, through the real console script."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

TINY = ("--trainer.max_epochs", "1", "--data.img_size", "128", "--data.batch_size", "4", "--data.num_workers", "0")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from lucidyolo.data.synth import write_synthetic
    from tests.conftest import run_lucid

    base = tmp_path_factory.mktemp("fitobb")
    data = write_synthetic(base / "data", ("rboxes",), 12, img_size=128, fmt="coco")
    env = {"LUCIDYOLO_CACHE_DIR": str(base / "cache")}
    r = run_lucid("fit", "obb", "--data-root", str(data), *TINY, "--trainer.default_root_dir", str(base / "runs"),
                  env=env, cwd=base)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = base / "runs" / "version_0"
    return {"base": base, "env": env, "data": data, "run_dir": run_dir, "ckpt": run_dir / "checkpoints" / "last.ckpt",
            "stdout": r.stdout}


def test_fit_logs_the_rotated_terms_and_metrics(run):
    with open(run["run_dir"] / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0"]
    for col in ("train/box_loss", "train/angle_loss", "train/l1_loss", "val/angle_loss", "metrics/mAP50(R)",
                "metrics/mAP50-95(R)", "metrics/precision(R)", "metrics/recall(R)"):
        assert col in rows[0] and rows[0][col] != "", col
        assert math.isfinite(float(rows[0][col])), col
    assert float(rows[0]["train/angle_loss"]) > 0
    angles = json.loads((run["run_dir"] / "labels.json").read_text())["panels"]["angle"]  # the task's own panel
    assert sum(angles["counts"]) == json.loads((run["run_dir"] / "labels.json").read_text())["instances"] > 0
    assert (run["run_dir"] / "labels.png").stat().st_size > 0
    assert 0.0 <= float(rows[0]["metrics/mAP50-95(R)"]) <= float(rows[0]["metrics/mAP50(R)"]) <= 1.0
    from tests.engine.curve_files import assert_curve_files

    assert_curve_files(run["run_dir"], "obb")


def test_predict_writes_rotated_boxes_and_their_corners(run, lucid):
    from lucidyolo.structures.geometry import rbox_to_corners

    out = run["base"] / "pred"
    images = sorted((run["data"] / "val").glob("*.jpg"))
    r = lucid("predict", "--checkpoint", str(run["ckpt"]), "--source", str(run["data"] / "val"), "--conf", "0",
              "--output", str(out / "p.json"), "--save", str(out / "drawn"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    pred = json.loads((out / "p.json").read_text())
    assert [Path(p["image"]).name for p in pred["images"]] == [p.name for p in images]
    for image in pred["images"]:
        assert len(image["predictions"]) == 300  # conf 0 keeps the whole top-k
        for p in image["predictions"][:20]:
            cx, cy, w, h, theta = p["rbox"]
            assert w >= h and -math.pi / 4 - 1e-4 <= theta < 3 * math.pi / 4 + 1e-4  # long-edge canonical
            corners = rbox_to_corners(np.array([p["rbox"]]))[0]
            assert np.allclose(corners, np.array(p["polygon"]), atol=0.02)
            assert p["name"] and 0 <= p["score"] <= 1
    drawn = sorted((out / "drawn").glob("*.jpg"))
    assert [p.name for p in drawn] == [p.name for p in images]


def test_export_onnx_has_seven_columns_and_passes_parity(run, lucid):
    onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    out = run["base"] / "model.onnx"
    r = lucid("export", "--checkpoint", str(run["ckpt"]), "--format", "onnx", "--img-size", "128", "--check",
              "--output", str(out), env=run["env"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    graph = onnx.load(str(out)).graph
    shapes = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in graph.output}
    assert shapes == {"detections": [1, 300, 7]}
    ops = {n.op_type for n in graph.node}
    assert "TopK" in ops and "NonMaxSuppression" not in ops


def test_eval_reports_rotated_map_per_tile_on_both_paths(run, lucid):
    out = run["base"] / "eval"
    r = lucid("eval", "--checkpoint", str(run["ckpt"]), "--img-size", "128", "--output", str(out / "report.json"),
              "--save-json", str(out / "results.json"), "--plots", str(out / "plots"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "obb"
    from tests.engine.curve_files import assert_curve_files

    assert_curve_files(out / "plots", "obb")  # the run folder's names
    assert_curve_files(out / "plots", "nms_obb")
    for path in ("e2e", "nms"):
        # synthetic images are not tiles of a scene: per-tile figures only
        assert set(report["paths"][path]) == {"rotated (per tile)"}
        stats = report["paths"][path]["rotated (per tile)"]["stats"]
        assert 0.0 <= stats["mAP50-95"] <= stats["mAP50"] <= 1.0
    saved = json.loads((out / "results.json").read_text())
    assert saved and all(len(d["rbox"]) == 5 and len(d["polygon"]) == 4 for d in saved)


def test_obb_refuses_more_than_one_device(run, lucid):
    r = lucid("fit", "obb", "--data-root", str(run["data"]), "--trainer.devices", "2", "--print-config",
              env=run["env"])
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_fit_writes_batch_pictures_drawn_by_the_task(run):
    """Training batches with their rotated boxes, validation batches with labels and predictions: whole JPEGs."""
    from tests.engine.batch_pictures import batch_picture_sizes, expected_batch_pictures

    sizes = batch_picture_sizes(run["run_dir"])
    assert set(sizes) == expected_batch_pictures(run["stdout"], batch_size=4)
    assert all(min(size) >= 128 for size in sizes.values())  # at least one 128 px tile each
