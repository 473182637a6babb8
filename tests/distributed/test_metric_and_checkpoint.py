"""A model trained in 2 processes: its epoch metric is single-process `lucid eval` on the same checkpoint over a
9-image (odd) validation split, and the checkpoint evaluates, predicts and exports in one process (issue 34,
items 2 and 3)."""

from __future__ import annotations

import csv
import json

import pytest

# a few images overfitted (nano, 128 px, mosaic off), validated on themselves once at the end: mAP50 ~0.2,
# far from the near-zero numbers of an untrained model, which agree with anything
EPOCHS = "40"


def _trained_in_two_processes(lucid, tmp_path, task: str):
    data = tmp_path / "data"
    r = lucid(
        "data",
        "synth",
        "--task",
        task,
        "--out",
        str(data),
        "--images",
        "18",
        "--img-size",
        "128",
        "--val-fraction",
        "0.5",
        "--format",
        "yolo",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert (
        len(list((data / "images" / "train").iterdir())) == 9
    )  # odd: one rank gets the padding duplicate
    r = lucid(
        "fit",
        task,
        "-c",
        f"{task}_nano_overfit.yaml",
        "--data-root",
        str(data),
        "--data.val_split",
        "train",
        "--data.img_size",
        "128",
        "--data.batch_size",
        "4",
        "--trainer.max_epochs",
        EPOCHS,
        "--trainer.check_val_every_n_epoch",
        EPOCHS,
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        "ddp",
        "--trainer.accelerator",
        "cpu",
        "--trainer.precision",
        "32-true",
        "--model.ema",
        "false",
        "--trainer.default_root_dir",
        str(tmp_path / "runs"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "runs" / "version_0"
    epoch = list(csv.DictReader((run / "results.csv").read_text().splitlines()))[-1]
    return data, run / "checkpoints" / "last.ckpt", epoch


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "kinds"), [("det", {"B": "bbox"}), ("seg", {"B": "bbox", "M": "segm"})]
)
def test_the_two_process_epoch_metric_is_single_process_eval(tmp_path, lucid, task, kinds):
    data, ckpt, epoch = _trained_in_two_processes(lucid, tmp_path, task)
    out = tmp_path / "report.json"
    r = lucid(
        "eval",
        "--checkpoint",
        str(ckpt),
        "--data-root",
        str(data),
        "--split",
        "train",
        "--no-fold",
        "--output",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["num_images"] == 9
    for letter, kind in kinds.items():
        stats = report["paths"]["e2e"][kind]["stats"]
        got = (
            float(epoch[f"metrics/mAP50({letter})"]),
            float(epoch[f"metrics/mAP50-95({letter})"]),
        )
        assert got == pytest.approx((stats["AP50"], stats["AP"]), abs=1e-6), (letter, got, stats)
    assert float(epoch["metrics/mAP50(B)"]) > 0.1  # a trained model, not a near-zero mAP

    # trained in 2 processes, used in 1
    pred = tmp_path / "pred.json"
    r = lucid(
        "predict",
        "--checkpoint",
        str(ckpt),
        "--source",
        str(data / "images" / "val"),
        "--output",
        str(pred),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(json.loads(pred.read_text())["images"]) == 9
    onnx = tmp_path / "model.onnx"
    r = lucid(
        "export", "--checkpoint", str(ckpt), "--format", "onnx", "--check", "--output", str(onnx)
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert onnx.stat().st_size > 0 and "parity" in r.stdout
