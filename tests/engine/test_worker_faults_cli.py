"""A failing or hanging loader worker never hangs `lucid fit` (real console script, injected faults).

The allocation failure fires in the second epoch (see :mod:`tests.faults`),
so the first epoch's ``last.ckpt`` exists and must survive intact; the hang
fires at the first batch (the signal tests need no finished epoch).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.faults import (
    fault_env,
    fired,
    group_alive,
    kill_group,
    start_lucid,
    tiny_det_root,
    wait_exit,
    wait_for,
)

SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs /dev/shm (the fault mimics torch's leftover file there)")


def _fit_args(root: Path, runs: Path) -> tuple[str, ...]:
    return (
        "fit", "det", "--data-root", str(root), "--data.img_size", "64", "--data.batch_size", "8",
        "--data.num_workers", "1", "--trainer.max_epochs", "3", "--optim.optimizer", "sgd",
        "--trainer.default_root_dir", str(runs),
    )


def _last_epoch(run_dir: Path) -> int:
    import torch

    return int(torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["epoch"])


def test_a_worker_that_cannot_allocate_shm_ends_the_run_with_exit_2_in_seconds(tmp_path):
    runs = tmp_path / "runs"
    last = runs / "version_0" / "checkpoints" / "last.ckpt"
    proc = start_lucid(*_fit_args(tiny_det_root(tmp_path / "data"), runs), env=fault_env(tmp_path, "fail", last), cwd=tmp_path)
    try:
        ended, out, err = wait_exit(proc, timeout=300)
        assert group_alive(proc) is False, "loader workers outlived the run"
    finally:
        kill_group(proc)
    shots = fired(tmp_path)
    assert shots, f"the fault never fired:\n{err[-3000:]}"
    assert proc.returncode == 2, err[-3000:]
    assert ended - shots[0][0] < 10, f"{ended - shots[0][0]:.1f} s from the failed allocation to the exit"
    text = " ".join(err.split())
    assert "error: A data-loader worker could not allocate shared memory" in text and "No space left on device" in text
    assert "--shm-size" in text and "data.num_workers" in text and "data.batch_size" in text
    assert f"lucid fit det --resume {runs / 'version_0'}" in text
    assert "Traceback" not in err
    assert _last_epoch(runs / "version_0") == 0  # the finished epoch's checkpoint is intact
    assert not [name for _, _, name in shots if (SHM / name).exists()], "torch's leftover segment was not removed"


@pytest.mark.parametrize("how", ["sigterm-to-main", "ctrl-c-to-group"])
def test_sigterm_and_ctrl_c_stop_a_run_blocked_on_its_loader_in_seconds(tmp_path, how):
    runs, root = tmp_path / "runs", tiny_det_root(tmp_path / "data")
    proc = start_lucid(*_fit_args(root, runs), env=fault_env(tmp_path, "block", root), cwd=tmp_path)
    try:
        wait_for(lambda: fired(tmp_path), 300, "the worker to block", proc)
        time.sleep(1.0)  # the main process is now waiting on a batch that never comes
        sent = time.time()
        if how == "sigterm-to-main":
            proc.send_signal(signal.SIGTERM)
        else:  # what a terminal does on Ctrl-C: the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        ended, out, err = wait_exit(proc, timeout=60)
        assert group_alive(proc) is False, "loader workers outlived the run"
    finally:
        kill_group(proc)
    assert ended - sent < 10, f"{ended - sent:.1f} s from the signal to the exit"
    expected = (143, "SIGTERM") if how == "sigterm-to-main" else (130, "Ctrl-C (SIGINT)")
    assert proc.returncode == expected[0], err[-3000:]
    text = " ".join(err.split())
    assert f"error: Stopped by {expected[1]}." in text and "No epoch had finished; start the run again." in text
    assert "Traceback" not in err
    assert not [name for _, _, name in fired(tmp_path) if (SHM / name).exists()], "a segment of the run was left in /dev/shm"
