"""Multi-process training (DDP on CPU, gloo) and one-epoch fits on the real sample data."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import real_data_root


@pytest.mark.slow
def test_det_trains_one_epoch_under_ddp_with_two_processes(tmp_path, lucid):
    r = lucid(
        "fit", "det", "--trainer.devices", "2", "--trainer.strategy", "ddp", "--trainer.accelerator", "cpu",
        "--trainer.max_epochs", "1", "--data.img_size", "128", "--data.synthetic_images", "24",
        "--data.batch_size", "4", "--data.num_workers", "0", "--trainer.default_root_dir", str(tmp_path / "runs"),
        env={"LUCIDYOLO_CACHE_DIR": str(tmp_path / "cache")}, cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    runs = sorted((tmp_path / "runs").glob("version_*"))
    assert [p.name for p in runs] == ["version_0"], "both ranks must share one run directory"
    assert (runs[0] / "checkpoints" / "last.ckpt").is_file()
    with open(runs[0] / "results.csv") as f:
        assert len(list(csv.DictReader(f))) == 1


def _fit_real(lucid, tmp_path, root):
    return lucid(
        "fit", "det", "--data-root", str(root), "--trainer.max_epochs", "1", "--data.img_size", "320",
        "--data.batch_size", "8", "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path,
    )


@pytest.mark.slow
@pytest.mark.realdata
def test_one_epoch_on_the_coco8_yolo_root(tmp_path, lucid):
    r = _fit_real(lucid, tmp_path, real_data_root() / "coco8")
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.slow
@pytest.mark.realdata
def test_one_epoch_and_eval_on_coco128_coco_json(tmp_path, lucid):
    root = real_data_root() / "coco128_coco"
    # coco128 has only a train split: validate on it too (explicit split names)
    r = lucid(
        "fit", "det", "--data-root", str(root), "--trainer.max_epochs", "1", "--data.img_size", "320",
        "--data.batch_size", "16", "--data.val_split", "train", "--trainer.limit_train_batches", "4",
        "--trainer.limit_val_batches", "2", "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    e = lucid("eval", "--checkpoint", str(ckpt), "--data-root", str(root), "--split", "train", "--img-size", "320",
              "--limit", "32", "--output", str(tmp_path / "report.json"))
    assert e.returncode == 0, e.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["num_images"] == 32 and len(report["paths"]["e2e"]["bbox"]["stats"]) == 12
    assert len(report["paths"]["e2e"]["bbox"]["per_class"]) > 0
