"""`lucid eval` scores at the run's training size unless --img-size says otherwise, and says which it used."""

from __future__ import annotations

import json

import pytest

from tests.cli.tiny_run import IMG_SIZE, write_tiny_run


def test_eval_defaults_to_the_checkpoints_img_size_and_reports_it(tmp_path, lucid):
    ckpt, _ = write_tiny_run(tmp_path)
    report_file = tmp_path / "report.json"
    r = lucid("eval", "--checkpoint", str(ckpt), "--device", "cpu", "--output", str(report_file))
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["img_size"] == IMG_SIZE == report["config"]["data"]["img_size"]  # not the task's 640
    assert report["img_size_source"] == "the run's data.img_size"
    assert f"image size: {IMG_SIZE} px (the run's data.img_size)" in r.stdout
    assert f"at {IMG_SIZE} px" in r.stdout  # the table title too


def test_an_explicit_img_size_wins_and_is_named_as_such(tmp_path):
    from lucidyolo.engine.commands.evaluate import run_eval

    ckpt, _ = write_tiny_run(tmp_path)
    report = run_eval(ckpt, img_size=96, device="cpu")
    assert (report["img_size"], report["img_size_source"]) == (96, "--img-size")


def test_an_unknown_coco_backend_exits_2_before_anything_runs(tmp_path, lucid):
    r = lucid("eval", "--checkpoint", str(tmp_path / "missing.ckpt"), "--coco-backend", "cocoapi")
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Unknown COCO scoring backend 'cocoapi'" in r.stderr and "pycocotools" in r.stderr


def test_both_backends_give_the_same_report(tmp_path):
    from lucidyolo.engine.commands.evaluate import run_eval

    ckpt, _ = write_tiny_run(tmp_path)
    slow = run_eval(ckpt, device="cpu", coco_backend="pycocotools")
    fast = run_eval(ckpt, device="cpu", coco_backend="faster_coco_eval")
    assert (slow["engine"], fast["engine"]) == ("pycocotools", "faster_coco_eval")
    for path, per_type in slow["paths"].items():
        for iou_type, stats in per_type.items():
            other = fast["paths"][path][iou_type]["stats"]
            assert other == {k: pytest.approx(v, abs=1e-6) for k, v in stats["stats"].items()}


def test_plots_into_a_file_exits_2_before_anything_runs(tmp_path, lucid):
    taken = tmp_path / "plots.png"
    taken.write_bytes(b"")
    r = lucid("eval", "--checkpoint", str(tmp_path / "missing.ckpt"), "--plots", str(taken))
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"--plots {taken} is a file, not a folder" in r.stderr and "Name a folder" in r.stderr


def test_eval_plots_and_per_class_precision_recall(tmp_path, lucid):
    from tests.engine.curve_files import assert_curve_files

    ckpt, _ = write_tiny_run(tmp_path)
    report_file = tmp_path / "report.json"
    r = lucid("eval", "--checkpoint", str(ckpt), "--device", "cpu", "--output", str(report_file),
              "--plots", str(tmp_path / "plots"))
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert sorted(report["plots"]) == sorted(str(p) for p in (tmp_path / "plots").iterdir())
    for path, prefix in (("e2e", "box"), ("nms", "nms_box")):  # the run folder's names; the second path prefixed
        data = assert_curve_files(tmp_path / "plots", prefix)
        stats = report["paths"][path]["bbox"]
        assert stats["curves"]["precision"] == data["precision"]
        assert [c["precision"] for c in stats["per_class"]] == [c["precision"] for c in data["per_class"]]
    assert "per class (bbox, e2e" in r.stdout
