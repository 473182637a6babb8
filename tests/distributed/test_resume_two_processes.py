"""A 2-process run SIGKILLed (its whole process group) in its second epoch and resumed with 2 processes ends
bit-identical to an uninterrupted 2-process run (issue 34, item 3)."""

from __future__ import annotations

import csv
import signal
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import kill_group, start_lucid, tiny_det_root, wait_exit, wait_for

pytestmark = pytest.mark.slow


def _args(root: Path, runs: Path) -> tuple[str, ...]:
    return (
        "fit",
        "det",
        "--data-root",
        str(root),
        "--data.img_size",
        "64",
        "--data.batch_size",
        "2",
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        "ddp",
        "--trainer.accelerator",
        "cpu",
        "--trainer.max_epochs",
        "3",
        "--optim.warmup_epochs",
        "1",
        "--augment.close_mosaic",
        "1",
        "--data.num_workers",
        "0",
        "--trainer.default_root_dir",
        str(runs),
    )


def _rows(run_dir: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((run_dir / "results.csv").read_text().splitlines()))


def test_a_killed_two_process_run_resumed_with_two_processes_ends_bit_identical(tmp_path):
    import torch

    root = tiny_det_root(tmp_path / "data")
    straight = run_lucid(*_args(root, tmp_path / "straight"), cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr[-3000:]

    run_dir = tmp_path / "killed" / "version_0"
    last = run_dir / "checkpoints" / "last.ckpt"
    proc = start_lucid(*_args(root, tmp_path / "killed"), env={}, cwd=tmp_path)
    try:
        wait_for(last.exists, 300, "the first epoch's last.ckpt", proc)
        kill_group(proc)  # both ranks (Lightning's second process runs in the same group), at once
        wait_exit(proc, 60)
    finally:
        kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    assert torch.load(last, weights_only=True)["epoch"] == 0

    resumed = run_lucid(
        "fit", "det", "--resume", str(last), cwd=tmp_path
    )  # the checkpoint's config: 2 processes
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    a = torch.load(
        tmp_path / "straight" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True
    )
    b = torch.load(last, weights_only=True)
    assert a["epoch"] == b["epoch"] == 2 and a["global_step"] == b["global_step"]
    for k, v in a["state_dict"].items():
        assert torch.equal(v, b["state_dict"][k]), f"weight {k} differs after the resume"
    assert a["lucid_ema"]["updates"] == b["lucid_ema"]["updates"]
    for k, v in a["lucid_ema"]["shadow"].items():
        assert torch.equal(v, b["lucid_ema"]["shadow"][k]), f"EMA {k} differs after the resume"
    assert _rows(tmp_path / "straight" / "version_0") == _rows(run_dir)
    assert sorted(p.name for p in (tmp_path / "killed").iterdir()) == ["version_0"]
