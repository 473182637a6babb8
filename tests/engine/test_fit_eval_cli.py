"""`lucid fit det` (embedded default) and `lucid eval` through the real console script."""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

TINY = ("--trainer.max_epochs", "2", "--data.synthetic_images", "24", "--data.img_size", "128",
        "--data.batch_size", "8", "--data.num_workers", "0")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.conftest import run_lucid

    base = tmp_path_factory.mktemp("fit")
    # a progress line after every batch (the default is one every 30 s): the short fit shows them all
    env = {"LUCIDYOLO_CACHE_DIR": str(base / "cache"), "LUCIDYOLO_PROGRESS_EVERY_S": "0"}
    r = run_lucid("fit", "det", *TINY, "--trainer.default_root_dir", str(base / "runs"), env=env, cwd=base)
    assert r.returncode == 0, r.stderr[-3000:]
    return {"base": base, "env": env, "run_dir": base / "runs" / "version_0", "stdout": r.stdout, "stderr": r.stderr}


def test_embedded_default_writes_a_whole_run_directory(run):
    d = run["run_dir"]
    for name in ("config.yaml", "results.csv", "metrics.csv", "results.png", "checkpoints/last.ckpt", "checkpoints/best.ckpt"):
        assert (d / name).is_file(), name
    assert list(d.glob("events.out.tfevents.*")), "TensorBoard events missing from the version folder"
    # the run records the thread count `auto` resolved to, so a resume keeps it
    assert isinstance(yaml.safe_load((d / "config.yaml").read_text())["trainer"]["threads"], int)
    with open(d / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    for col in ("train/box_loss", "train/cls_loss", "metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)",
                "metrics/mAP50-95(B)", "lr/pg0"):
        assert col in rows[0] and rows[-1][col] != "" and rows[0][col] != ""
    # each row pairs an epoch's own training means with that epoch's validation (no one-epoch shift)
    with open(d / "metrics.csv") as f:
        logged = {int(r["epoch"]): float(r["train/box_loss"]) for r in csv.DictReader(f) if r.get("train/box_loss")}
    assert {int(r["epoch"]): float(r["train/box_loss"]) for r in rows} == pytest.approx(logged, rel=1e-5)
    import torch

    ckpt = torch.load(d / "checkpoints" / "last.ckpt", weights_only=True)  # our checkpoints hold plain types
    assert ckpt["lucid"]["config"]["model"]["task"] == "det" and "lucid_ema" in ckpt
    assert len(ckpt["lucid"]["class_names"]) == 4


def test_fit_draws_the_curves_of_the_epoch_best_ckpt_holds(run):
    import torch

    from tests.engine.curve_files import assert_curve_files

    d = run["run_dir"]
    data = assert_curve_files(d, "box")
    assert data["names"] == torch.load(d / "checkpoints" / "best.ckpt", weights_only=True)["lucid"]["class_names"]
    # P / R of results.csv at the best epoch are the JSON's: the same matches, the same confidence
    best = torch.load(d / "checkpoints" / "best.ckpt", weights_only=True)["epoch"]
    with open(d / "results.csv") as f:
        row = next(r for r in csv.DictReader(f) if int(r["epoch"]) == best)
    assert float(row["metrics/precision(B)"]) == pytest.approx(data["precision"], abs=1e-6)
    assert float(row["metrics/recall(B)"]) == pytest.approx(data["recall"], abs=1e-6)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(d), size_guidance={"images": 0})
    events.Reload()
    assert {"best/B/pr_curve", "best/B/confusion_matrix"} <= set(events.Tags()["images"])


def test_fit_writes_label_statistics_before_training(run):
    from PIL import Image

    d = run["run_dir"]
    stats = json.loads((d / "labels.json").read_text())
    assert stats["counted"] == "instances" and len(stats["per_class"]) == 4
    assert sum(stats["per_class"]) == stats["instances"] > 0
    assert {"classes", "box_centre", "box_size"} <= set(stats["panels"])
    with Image.open(d / "labels.png") as im:
        im.verify()
    assert f"label statistics: {d / 'labels.png'} (4 classes, {stats['instances']} instances)" in run["stdout"]


def test_a_piped_run_prints_one_line_per_epoch_and_no_known_noise(run):
    """stdout is a pipe here: no progress bar, so each epoch gets a line matching results.csv."""
    import re

    lines = [ln for ln in run["stdout"].splitlines() if ln.startswith("epoch ")]
    assert [ln.split(" | ")[0] for ln in lines] == ["epoch 1/2", "epoch 2/2"], run["stdout"]
    with open(run["run_dir"] / "results.csv") as f:
        rows = list(csv.DictReader(f))
    for line, row in zip(lines, rows, strict=True):
        fields = dict(re.findall(r"(val/\S+) ([0-9.]+)", line))
        assert float(fields["val/mAP50-95"]) == pytest.approx(float(row["metrics/mAP50-95(B)"]), abs=1e-4)
        box = float(re.search(r"loss box (\S+)", line).group(1))
        assert box == pytest.approx(float(row["train/box_loss"]), rel=1e-3)
        assert re.search(r"\| [0-9.]+ img/s \|", line) and re.search(r"elapsed, ~\d+:\d\d left$", line)
    assert "on_after_batch_transfer" not in run["stdout"] + run.get("stderr", "")
    assert "Tip:" not in run["stdout"]


def test_a_piped_run_prints_progress_lines_within_each_epoch(run):
    """19 training images at batch 8: 3 batches an epoch (the first batch of the fit has its own line)."""
    import re

    seen = re.findall(r"^progress: epoch (\d)/2, batch (\d+)/(\d+) \| [0-9.]+ img/s \| ~\d+:\d\d left in the epoch$",
                      run["stdout"], re.M)
    assert seen == [("1", "2", "3"), ("1", "3", "3"), ("2", "1", "3"), ("2", "2", "3"), ("2", "3", "3")], run["stdout"]
    assert re.findall(r"^progress: validation of epoch (\d), batch 1/1 \|", run["stdout"], re.M) == ["1", "2"]


def test_fit_writes_batch_images_with_labels_and_predictions(run):
    """19 training images in batches of 8, 8 and 3 (3 x 3, 3 x 3 and 2 x 2 grids of 128 px tiles) and the one
    validation batch of 5 (3 x 2)."""
    from tests.engine.batch_pictures import batch_picture_sizes

    assert batch_picture_sizes(run["run_dir"]) == {
        "train_batch0.jpg": (384, 384), "train_batch1.jpg": (384, 384), "train_batch2.jpg": (256, 256),
        "val_batch0_labels.jpg": (384, 256), "val_batch0_pred.jpg": (384, 256),
    }


def test_eval_numbers_equal_pycocotools_on_the_saved_json(run, lucid):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    out = run["base"] / "eval"
    r = lucid(
        "eval", "--checkpoint", str(run["run_dir"] / "checkpoints" / "last.ckpt"), "--img-size", "128",
        "--output", str(out / "report.json"), "--save-json", str(out / "results.json"), env=run["env"],
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "det" and len(report["checkpoint_sha256"]) == 64 and report["weights"] == "ema"
    assert set(report["paths"]) == {"e2e", "nms"}
    # scored by faster-coco-eval (auto, installed with dev); pycocotools below is the oracle
    assert report["engine"] == "faster_coco_eval"
    ann = next(Path(report["data_root"]).glob("annotations/instances_val*.json"))
    for path, name in (("e2e", "results.json"), ("nms", "results_nms.json")):
        gt = COCO(str(ann))
        dt = gt.loadRes(str(out / name))
        e = COCOeval(gt, dt, "bbox")
        e.evaluate()
        e.accumulate()
        e.summarize()
        ours = list(report["paths"][path]["bbox"]["stats"].values())
        assert ours == pytest.approx(list(e.stats), abs=1e-6)


def test_eval_plots_per_class_precision_recall_and_pr_area_equal_to_ap50(run, lucid):
    from tests.engine.curve_files import assert_curve_files

    out = run["base"] / "eval_plots"
    r = lucid("eval", "--checkpoint", str(run["run_dir"] / "checkpoints" / "best.ckpt"), "--img-size", "128",
              "--output", str(out / "report.json"), "--plots", str(out / "plots"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    for path, prefix in (("e2e", "box"), ("nms", "nms_box")):  # the run folder's names
        data = assert_curve_files(out / "plots", prefix)
        stats = report["paths"][path]["bbox"]
        assert stats["curves"]["best_conf"] == data["best_conf"]
        for cls, row in zip(stats["per_class"], data["pr_precision"], strict=True):
            assert {"ap", "ap50", "precision", "recall"} <= set(cls)
            if cls["ap50"] >= 0:
                assert sum(row) / len(row) == pytest.approx(cls["ap50"], abs=1e-3)  # the PR curve's area is AP50
    assert len(report["plots"]) == 14 and "per class (bbox, e2e" in r.stdout


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_eval_refuses_a_crafted_checkpoint_before_it_runs(tmp_path, lucid):
    marker = tmp_path / "pwned"
    bad = tmp_path / "bad.ckpt"
    with open(bad, "wb") as f:
        pickle.dump({"state_dict": {}, "x": _Payload(marker)}, f)
    r = lucid("eval", "--checkpoint", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert not marker.exists()


def test_eval_refuses_a_contradicting_task(run, lucid):
    r = lucid("eval", "--checkpoint", str(run["run_dir"] / "checkpoints" / "last.ckpt"), "--task", "pose", env=run["env"])
    assert r.returncode == 2 and "trained for 'det'" in r.stderr


def test_explicit_num_classes_must_match_the_dataset(run, lucid):
    r = lucid("fit", "det", *TINY, "--model.num_classes", "7", "--trainer.default_root_dir", str(run["base"] / "r2"),
              env=run["env"], cwd=run["base"])
    assert r.returncode == 2 and "7" in r.stderr and "4" in r.stderr


def test_predict_writes_json_and_annotated_images(run, lucid):
    ckpt = run["run_dir"] / "checkpoints" / "last.ckpt"
    data_root = next((run["base"] / "cache" / "synthetic").iterdir())
    out = run["base"] / "pred"
    r = lucid("predict", "--checkpoint", str(ckpt), "--source", str(data_root / "val"), "--conf", "0",
              "--save", str(out / "drawn"), "--output", str(out / "pred.json"), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    pred = json.loads((out / "pred.json").read_text())
    images = sorted((data_root / "val").glob("*.jpg"))
    assert [Path(p["image"]).name for p in pred["images"]] == [p.name for p in images]
    first = pred["images"][0]
    assert len(first["predictions"]) == 300  # conf 0 keeps the whole top-k
    x1, y1, x2, y2 = first["predictions"][0]["box"]
    assert 0 <= x1 <= x2 <= first["width"] and 0 <= y1 <= y2 <= first["height"]  # original pixels
    assert len(list((out / "drawn").glob("*.jpg"))) == len(images)


def test_predict_refuses_a_source_that_is_not_an_image(run, lucid, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    r = lucid("predict", "--checkpoint", str(run["run_dir"] / "checkpoints" / "last.ckpt"), "--source", str(text))
    assert r.returncode == 2 and "is neither an image" in r.stderr and "a video" in r.stderr


def test_export_writes_an_nms_free_onnx_graph_that_onnxruntime_reproduces(run, lucid):
    onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    out = run["base"] / "model.onnx"
    r = lucid("export", "--checkpoint", str(run["run_dir"] / "checkpoints" / "last.ckpt"), "--check",
              "--output", str(out), env=run["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert "TopK" in ops and "NonMaxSuppression" not in ops
    assert "parity" in r.stdout
