"""`lucid fit keypoints` on a synthetic 7-point COCO root -> predict -> export -> eval, through the real console script."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

K = 7
TINY = ("--trainer.max_epochs", "1", "--data.img_size", "128", "--data.batch_size", "4", "--data.num_workers", "0")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from lucidyolo.data.synth import write_synthetic
    from tests.conftest import run_lucid

    base = tmp_path_factory.mktemp("fitkpt")
    data = write_synthetic(base / "data", ("keypoints", "crowd"), 12, img_size=128, fmt="coco")
    env = {"LUCIDYOLO_CACHE_DIR": str(base / "cache")}
    r = run_lucid("fit", "keypoints", "--data-root", str(data), *TINY, "--trainer.default_root_dir", str(base / "runs"),
                  env=env, cwd=base)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = base / "runs" / "version_0"
    return {"base": base, "env": env, "data": data, "run_dir": run_dir, "ckpt": run_dir / "checkpoints" / "last.ckpt",
            "stdout": r.stdout}


def test_fit_logs_keypoint_terms_and_the_oks_column(run):
    with open(run["run_dir"] / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0"]
    for col in ("train/box_loss", "train/kpt_loss", "train/oks_loss", "val/kpt_loss", "metrics/mAP50-95(P)",
                "metrics/precision(P)", "metrics/recall(P)"):
        assert col in rows[0] and rows[0][col] != "", col
        assert math.isfinite(float(rows[0][col])), col
    assert float(rows[0]["train/kpt_loss"]) != 0
    assert 0.0 <= float(rows[0]["metrics/mAP50-95(P)"]) <= 1.0
    from tests.engine.curve_files import assert_curve_files

    assert_curve_files(run["run_dir"], "keypoints")  # OKS matching
    import torch

    ckpt = torch.load(run["ckpt"], weights_only=True)
    assert ckpt["lucid"]["config"]["model"]["task"] == "keypoints"
    assert ckpt["lucid"]["dataset_meta"]["num_keypoints"] == K  # 'auto' read the data
    assert ckpt["lucid"]["dataset_meta"]["flip_idx"] == [0, 2, 1, 4, 3, 6, 5]
    # the synthetic COCO file's person category declares its limbs 1-based: (1, 2), (1, 3), ... (5, 7)
    assert ckpt["lucid"]["dataset_meta"]["skeleton"] == [[0, 1], [0, 2], [1, 3], [2, 4], [3, 5], [4, 6]]


def test_predict_writes_keypoints_in_original_pixels_and_drawings(run, lucid):
    out = run["base"] / "pred"
    images = sorted((run["data"] / "val").glob("*.jpg"))
    r = lucid("predict", "--checkpoint", str(run["ckpt"]), "--source", str(run["data"] / "val"), "--conf", "0",
              "--output", str(out / "p.json"), "--save", str(out / "drawn"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    pred = json.loads((out / "p.json").read_text())
    assert [Path(p["image"]).name for p in pred["images"]] == [p.name for p in images]
    for image in pred["images"]:
        w, h = image["width"], image["height"]
        assert len(image["predictions"]) == 300  # conf 0 keeps the whole top-k
        for p in image["predictions"]:
            points = p["keypoints"]
            assert len(points) == K and all(len(t) == 3 for t in points)
            for x, y, c in points:
                assert 0 <= x <= w and 0 <= y <= h and 0 <= c <= 1
    drawn = sorted((out / "drawn").glob("*.jpg"))
    assert [p.name for p in drawn] == [p.name for p in images]


def test_export_onnx_passes_the_keypoint_parity_check(run, lucid):
    onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    out = run["base"] / "model.onnx"
    r = lucid("export", "--checkpoint", str(run["ckpt"]), "--format", "onnx", "--img-size", "128", "--check",
              "--output", str(out), env=run["env"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    text = " ".join(r.stdout.split())  # rich wraps long lines
    compared = re.search(r"(\d+) rows' points compared", text)
    assert compared, text[-2000:]
    assert int(compared.group(1)) > 0  # the check looked at some points, not at an empty set
    graph = onnx.load(str(out)).graph
    shapes = {o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in graph.output}
    assert list(shapes) == ["detections", "keypoints"]
    assert shapes == {"detections": [1, 300, 6], "keypoints": [1, 300, K, 3]}
    ops = {n.op_type for n in graph.node}
    assert "TopK" in ops and "NonMaxSuppression" not in ops


def test_eval_refuses_a_split_without_17_points(run, lucid):
    r = lucid("eval", "--checkpoint", str(run["ckpt"]), "--img-size", "128", env=run["env"])
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    assert "17 person points" in r.stderr and f"{K} per instance" in r.stderr


def test_the_pose_alias_reads_a_yolo_root(run, lucid, tmp_path):
    from lucidyolo.data.synth import write_synthetic

    root = write_synthetic(tmp_path / "yolo", ("keypoints", "crowd"), 6, img_size=128, fmt="yolo")
    r = lucid("fit", "pose", "--data-root", str(root), "--print-config", env=run["env"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"^\s+task: keypoints$", r.stdout, re.M) and str(root) in r.stdout
    # the alias reaches the data: K comes from the root's kpt_shape, and an explicit K must agree with it
    r = lucid("fit", "pose", "--data-root", str(root), "--model.num_keypoints", "5", *TINY,
              "--trainer.default_root_dir", str(tmp_path / "runs"), env=run["env"], cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "= 5" in r.stderr and f"declares {K} keypoints" in r.stderr


def test_fit_writes_batch_pictures_drawn_by_the_task(run):
    """Training batches with their keypoints and the data's skeleton, validation batches with labels and
    predictions: whole JPEGs."""
    from tests.engine.batch_pictures import batch_picture_sizes, expected_batch_pictures

    sizes = batch_picture_sizes(run["run_dir"])
    assert set(sizes) == expected_batch_pictures(run["stdout"], batch_size=4)
    assert all(min(size) >= 128 for size in sizes.values())  # at least one 128 px tile each
