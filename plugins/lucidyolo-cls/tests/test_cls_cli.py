"""The plugin as a user meets it: installed with pip, listed, trained, scored, used and exported through `lucid`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lucidyolo_cls.synthetic import write_class_folders

LUCID = str(Path(sys.executable).with_name("lucid"))


def lucid(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "LUCIDYOLO_CACHE_DIR": str(cwd / "cache"), "COLUMNS": "200"}
    return subprocess.run([LUCID, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_lucid_plugins_lists_cls_from_its_own_distribution(tmp_path):
    r = lucid("plugins", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)["tasks"]}
    cls = rows["cls"]
    assert cls["status"] == "ok" and cls["distribution"] == "lucidyolo-cls" and cls["builtin"] is False
    assert cls["trainable"] is True and cls["api_version"] == "3.0" and cls["adapted"] is False


def test_the_dual_head_keys_are_not_keys_of_a_task_without_that_head(tmp_path):
    """The built-in tasks share the dual head's gains and top-k; a classifier has no such head."""
    r = lucid("fit", "cls", "--print-config", "--model.box_gain", "3", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "box_gain" in r.stderr
    shown = lucid("fit", "cls", "--print-config", cwd=tmp_path)
    assert shown.returncode == 0 and "o2m_topk" not in shown.stdout and "label_smoothing" in shown.stdout
    det = lucid("fit", "det", "--print-config", "--model.box_gain", "3", cwd=tmp_path)
    assert det.returncode == 0 and "box_gain: 3" in det.stdout, det.stderr


def test_fit_one_epoch_then_eval_predict_and_export(tmp_path):
    root = write_class_folders(tmp_path / "shapes", 32, 64, seed=0)
    t0 = time.perf_counter()
    fit = lucid(
        "fit", "cls", "--config", "cls_nano_synthetic.yaml", "--data-root", str(root),
        "--trainer.max_epochs", "1", "--data.num_workers", "0", "--trainer.default_root_dir", str(tmp_path / "runs"),
        cwd=tmp_path,
    )
    wall = time.perf_counter() - t0
    assert fit.returncode == 0, fit.stdout + fit.stderr
    run = tmp_path / "runs" / "version_0"
    header = (run / "results.csv").read_text().splitlines()[0].split(",")
    assert header == ["epoch", "train/ce_loss", "metrics/accuracy_top1", "metrics/accuracy_top5", "val/ce_loss", "lr/pg0"]
    ckpt = run / "checkpoints" / "last.ckpt"
    assert ckpt.is_file() and "val/top1" in fit.stdout
    labels = json.loads((run / "labels.json").read_text())  # no boxes: images per class only
    assert labels["counted"] == "images" and sum(labels["per_class"]) == 24 and set(labels["panels"]) == {"classes"}
    assert (run / "labels.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "(4 classes, 24 images)" in fit.stdout
    # the curves and confusion matrix of every image's top-1 prediction (the predictions top-1 accuracy counts)
    from PIL import Image

    for name in ("pr_curve", "f1_curve", "p_curve", "r_curve", "confusion_matrix", "confusion_matrix_normalized"):
        with Image.open(run / f"C_{name}.png") as im:
            im.verify()
    curves = json.loads((run / "C_curves.json").read_text())
    import torch

    assert curves["names"] == torch.load(run / "checkpoints" / "best.ckpt", weights_only=True)["lucid"]["class_names"]
    num_gt = [c["num_gt"] for c in curves["per_class"]]
    assert sum(num_gt) == 8  # one ground truth per validation image
    # rows (true classes) account for every image once: right, confused with a class, or below the threshold
    assert [sum(row) for row in curves["confusion_matrix"][:-1]] == num_gt
    # batch pictures through the plugin's target_rows and draw: 24 train / 8 val images, batches of 16
    from PIL import Image

    pictures = sorted(p.name for p in run.glob("*_batch*.jpg"))
    assert pictures == ["train_batch0.jpg", "train_batch1.jpg", "val_batch0_labels.jpg", "val_batch0_pred.jpg"]
    for name in pictures:
        with Image.open(run / name) as im:
            assert im.format == "JPEG"
            im.load()  # every byte decoded: a truncated file fails
    print(f"one epoch of lucid fit cls: {wall:.1f} s wall")

    report_path = tmp_path / "report.json"
    ev = lucid("eval", "--checkpoint", str(ckpt), "--img-size", "64", "--output", str(report_path), cwd=tmp_path)
    assert ev.returncode == 0, ev.stdout + ev.stderr
    report = json.loads(report_path.read_text())
    stats = report["paths"]["e2e"]["classification"]["stats"]
    assert report["task"] == "cls" and report["num_images"] == 8
    assert 0.0 <= stats["top1"] <= stats["top5"] <= 1.0

    image = next((root / "val" / "circle").glob("*.jpg"))
    pr = lucid("predict", "--checkpoint", str(ckpt), "--source", str(image), "--conf", "0",
               "--output", str(tmp_path / "pred.json"), cwd=tmp_path)
    assert pr.returncode == 0, pr.stdout + pr.stderr
    preds = json.loads((tmp_path / "pred.json").read_text())["images"][0]["predictions"]
    assert [p["rank"] for p in preds] == [1, 2, 3, 4]  # top-k over the 4 classes, best first
    assert sum(p["score"] for p in preds) == pytest.approx(1.0, abs=1e-3)
    assert preds[0]["name"] in pr.stdout
    txt = lucid("predict", "--checkpoint", str(ckpt), "--source", str(image), "--conf", "0",
                "--save-txt", str(tmp_path / "labels"), cwd=tmp_path)
    assert txt.returncode == 0, txt.stdout + txt.stderr
    lines = (tmp_path / "labels" / f"{image.stem}.txt").read_text().splitlines()
    assert [(int(line.split()[0]), float(line.split()[1])) for line in lines] == [(p["label"], p["score"]) for p in preds]
    js = lucid("predict", "--checkpoint", str(ckpt), "--source", str(image), "--save-json",
               str(tmp_path / "coco.json"), cwd=tmp_path)  # image classes have no COCO results form
    assert js.returncode == 2 and "provides no coco_results" in js.stderr and "Traceback" not in js.stderr
    assert not (tmp_path / "coco.json").exists()

    ex = lucid("export", "--checkpoint", str(ckpt), "--img-size", "64", "--check", cwd=tmp_path)
    assert ex.returncode == 0, ex.stdout + ex.stderr
    assert "top-1 equal True" in ex.stdout and ckpt.with_suffix(".onnx").is_file()
    ts = lucid("export", "--checkpoint", str(ckpt), "--img-size", "64", "--format", "torchscript", "--check",
               cwd=tmp_path)  # the plugin's check runs the file in lucid's runtime for its format
    assert ts.returncode == 0, ts.stdout + ts.stderr
    assert "top-1 equal True" in ts.stdout


def test_a_folder_that_is_not_a_class_set_is_a_clear_error(tmp_path):
    (tmp_path / "data").mkdir()
    r = lucid("fit", "cls", "--data-root", str(tmp_path / "data"), "--trainer.max_epochs", "1", cwd=tmp_path)
    assert r.returncode == 2 and "train/" in r.stderr and "Traceback" not in r.stderr


def test_data_synth_and_check_use_the_tasks_own_layout(tmp_path):
    out = tmp_path / "set"
    r = lucid("data", "synth", "--task", "cls", "--out", str(out), "--images", "16", "--img-size", "64", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (out / "train").iterdir()) == ["circle", "cross", "square", "triangle"]
    r = lucid("data", "check", "--task", "cls", "--data-root", str(out), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    train = report["splits"][0]
    assert report["ok"] and train["layout"] == "class-folders" and train["background_images"] == 0
    assert sum(train["images_per_class"].values()) == train["images"] == 12
    assert not train["warnings"]  # no "every image is background" for a classification set


@pytest.mark.slow
def test_fit_from_a_cls_weights_file_maps_the_classifier_rows_by_class_name(tmp_path):
    import shutil

    import torch

    root = write_class_folders(tmp_path / "shapes", 16, 64, seed=0)
    args = ("--config", "cls_nano_synthetic.yaml", "--trainer.max_epochs", "1", "--data.num_workers", "0",
            "--trainer.default_root_dir", str(tmp_path / "runs"), "--data.plot_batches", "0")
    first = lucid("fit", "cls", "--data-root", str(root), *args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    ex = lucid("export", "--checkpoint", str(ckpt), "--format", "weights", "--output", str(tmp_path / "w.pt"),
               cwd=tmp_path)
    assert ex.returncode == 0, ex.stdout + ex.stderr
    # a superset whose new class sorts between the old ones: class folders are read in name order
    more = tmp_path / "more"
    shutil.copytree(root, more)
    for split in ("train", "val"):
        shutil.copytree(more / split / "circle", more / split / "diamond")
    second = lucid("fit", "cls", "--data-root", str(more), *args, "--model.weights", str(tmp_path / "w.pt"),
                   cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "classes: 4 of 5 matched by name (circle, cross, square, triangle); new: diamond" in second.stdout
    report = json.loads((tmp_path / "runs" / "version_1" / "transfer.json").read_text())
    assert report["tensors"]["class_rows_mapped"] == ["fc.weight", "fc.bias"]
    assert not list((tmp_path / "runs").glob("*/*_batch*.jpg"))  # --data.plot_batches 0: no batch picture
    assert [m["from_index"] for m in report["classes"]["mapping"]] == [0, 1, None, 2, 3]
    start = torch.load(tmp_path / "w.pt", weights_only=True)["state_dict"]["model.fc.bias"]
    assert start.shape == (4,)
