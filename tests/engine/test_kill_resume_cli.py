"""A `lucid fit` SIGKILLed mid-epoch and resumed in a new process ends bit-identical to an uninterrupted run.

Real processes through the console script, automatic workers, MuSGD, EMA,
warmup and the close-mosaic switch all inside the replayed span: the kill
lands in epoch 1, so the resumed process replays epoch 1 from epoch 0's
``last.ckpt`` and then trains epoch 2 without mosaic.
"""

from __future__ import annotations

import csv
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import kill_group, start_lucid, tiny_det_root, wait_exit, wait_for

pytestmark = pytest.mark.slow


def _args(root: Path, runs: Path) -> tuple[str, ...]:
    return (
        "fit", "det", "--data-root", str(root), "--data.img_size", "64", "--data.batch_size", "4",
        "--trainer.max_epochs", "4", "--optim.warmup_epochs", "1", "--augment.close_mosaic", "1",
        # a named worker: a CPU step gets no automatic workers on a small machine, and the kill must hit a pool
        "--data.num_workers", "1", "--trainer.default_root_dir", str(runs),
    )


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "results.csv") as f:
        return list(csv.DictReader(f))


def test_a_sigkilled_run_resumed_in_a_new_process_ends_bit_identical(tmp_path):
    import torch

    root = tiny_det_root(tmp_path / "data")
    straight = run_lucid(*_args(root, tmp_path / "straight"), cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr[-3000:]
    assert "loader workers: " in straight.stdout and "loader workers: 0 training" not in straight.stdout

    run_dir = tmp_path / "killed" / "version_0"
    last = run_dir / "checkpoints" / "last.ckpt"
    proc = start_lucid(*_args(root, tmp_path / "killed"), env={}, cwd=tmp_path)
    try:
        wait_for(last.exists, 300, "the first epoch's last.ckpt", proc)
        # into epoch 1: its first steps are lost with the process (an epoch of this set can take under 1 s)
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)  # the main process only, as the OOM killer would
        wait_exit(proc, 60)
    finally:
        kill_group(proc)
    # an epoch can take ~0.3 s, so the kill may land an epoch later than aimed; what matters is that some
    # epochs were still to run and that the resumed run ends where the straight one did
    assert torch.load(last, weights_only=True)["epoch"] < 3

    resumed = run_lucid("fit", "det", "--resume", str(last), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    a = torch.load(tmp_path / "straight" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)
    b = torch.load(last, weights_only=True)
    assert a["epoch"] == b["epoch"] == 3 and a["global_step"] == b["global_step"]
    for k, v in a["state_dict"].items():
        assert torch.equal(v, b["state_dict"][k]), f"weight {k} differs after the resume"
    assert a["lucid_ema"]["updates"] == b["lucid_ema"]["updates"]
    for k, v in a["lucid_ema"]["shadow"].items():
        assert torch.equal(v, b["lucid_ema"]["shadow"][k]), f"EMA {k} differs after the resume"
    assert _rows(tmp_path / "straight" / "version_0") == _rows(run_dir)
