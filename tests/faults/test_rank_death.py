"""A rank of a 2-process fit killed by SIGKILL: the job stops with one line naming the rank and the signal, and
the resume command; the resume then finishes the run (issue 45, defect 3). Rank 0 killed (the ``lucid`` process
itself, which can say nothing): the rank it launched says so in one line instead of gloo's traceback."""

from __future__ import annotations

import csv
import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import kill_group, start_lucid, tiny_det_root, wait_exit, wait_for
from tests.faults.matrix import record

pytestmark = pytest.mark.slow

EPOCHS = 4
"""Enough that the kill, right after the first epoch's checkpoint, lands well before the end."""


def _args(root: Path, runs: Path) -> tuple[str, ...]:
    return (
        "fit", "det", "--data-root", str(root), "--data.img_size", "64", "--data.batch_size", "2",
        "--trainer.devices", "2", "--trainer.strategy", "ddp", "--trainer.accelerator", "cpu",
        "--trainer.max_epochs", str(EPOCHS), "--optim.warmup_epochs", "1", "--augment.close_mosaic", "1",
        "--data.num_workers", "0", "--trainer.default_root_dir", str(runs),
    )


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        kids += [int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return kids


def _start_and_wait(tmp_path: Path):
    root = tiny_det_root(tmp_path / "data")
    run_dir = tmp_path / "runs" / "version_0"
    proc = start_lucid(*_args(root, tmp_path / "runs"), env={}, cwd=tmp_path)
    wait_for((run_dir / "checkpoints" / "last.ckpt").exists, 300, "the first epoch's last.ckpt", proc)
    children = _children(proc.pid)  # Lightning's launcher: rank 0 is the lucid process, rank 1 its one child
    assert len(children) == 1, children
    return proc, children[0], run_dir


def test_a_killed_rank_ends_the_job_with_one_line_and_the_resume_command(tmp_path):
    proc, rank1, run_dir = _start_and_wait(tmp_path)
    try:
        os.kill(rank1, signal.SIGKILL)
        killed = time.monotonic()
        _, _, err = wait_exit(proc, 60)
        took = time.monotonic() - killed
    finally:
        kill_group(proc)
    text = " ".join(err.split())
    command = f"lucid fit det --resume {run_dir}"
    resumed = run_lucid("fit", "det", "--resume", str(run_dir), cwd=tmp_path)  # the checkpoint's config: 2 processes
    rows = list(csv.DictReader((run_dir / "results.csv").read_text().splitlines()))
    ok = (
        proc.returncode == 128 + signal.SIGKILL and took < 30 and "Traceback" not in err
        and f"Process rank 1 (pid {rank1}) was killed by SIGKILL (signal 9); the other ranks were stopped." in text
        and f"Continue from the last finished epoch with `{command}`." in text
        and resumed.returncode == 0 and [int(r["epoch"]) for r in rows] == list(range(EPOCHS))
    )
    record("fit det (2 processes)", "a rank killed (SIGKILL)", proc.returncode, ok,
           "the job stops; one line names the rank; resume works")
    assert proc.returncode == 137 and took < 30, (proc.returncode, took, err[-3000:])
    assert "Traceback" not in err and "Connection reset" not in err, err[-3000:]
    assert f"Process rank 1 (pid {rank1}) was killed by SIGKILL (signal 9); the other ranks were stopped." in text, err
    assert f"Continue from the last finished epoch with `{command}`." in text, err
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [int(r["epoch"]) for r in rows] == list(range(EPOCHS)), rows  # one row per epoch, none twice


def test_rank_zero_killed_leaves_its_child_saying_so(tmp_path):
    proc, rank1, run_dir = _start_and_wait(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)  # the lucid process itself: nothing in it can print
        _, _, err = wait_exit(proc, 60)  # the child holds the pipes until it ends
    finally:
        kill_group(proc)
    text = " ".join(err.split())
    assert proc.returncode == -signal.SIGKILL
    assert "Traceback" not in err and "Connection reset" not in err, err[-3000:]
    assert f"Process rank 0 (pid {proc.pid}), which launched rank 1 (pid {rank1}), is gone; rank 1 stopped too." in text
    assert f"`lucid fit det --resume {run_dir}`" in text, err
