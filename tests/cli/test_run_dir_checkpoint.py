"""`--checkpoint RUN_DIR` means the run's best.ckpt (else last.ckpt) for eval, predict and export alike."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder laid out as `lucid fit` leaves it, holding only last.ckpt (no validation picked a best)."""
    base = tmp_path_factory.mktemp("rundir")
    ckpt, root = write_tiny_run(base)
    run = base / "runs" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    shutil.copy(ckpt, run / "checkpoints" / "last.ckpt")
    return run, root


def test_eval_predict_and_export_read_the_run_folders_checkpoint(run_dir, lucid, tmp_path):
    run, root = run_dir
    last = run / "checkpoints" / "last.ckpt"
    report = tmp_path / "report.json"
    r = lucid("eval", "--checkpoint", str(run), "--device", "cpu", "--limit", "2", "--output", str(report))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(report.read_text())
    assert got["checkpoint"] == str(last)  # the file it scored, not the folder
    assert got["checkpoint_sha256"] == hashlib.sha256(last.read_bytes()).hexdigest()

    preds = tmp_path / "pred.json"
    r = lucid("predict", "--checkpoint", str(run), "--source", str(root / "val"), "--conf", "0.9",
              "--device", "cpu", "--output", str(preds))
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(preds.read_text())["checkpoint"] == str(last)

    weights = tmp_path / "w.pt"
    r = lucid("export", "--checkpoint", str(run), "--format", "weights", "--output", str(weights))
    assert r.returncode == 0, r.stderr[-3000:]
    assert weights.is_file()


def test_a_run_folder_without_checkpoints_says_where_it_looked(tmp_path, lucid):
    empty = tmp_path / "runs" / "version_3"
    empty.mkdir(parents=True)
    r = lucid("eval", "--checkpoint", str(empty), "--device", "cpu")
    assert r.returncode == 2, r.stderr[-3000:]
    assert str(empty) in r.stderr + r.stdout and "Traceback" not in r.stderr
