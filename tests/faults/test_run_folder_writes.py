"""Every file of a run folder is whole or absent after a kill; a run killed in its first save is refused plainly.

Issue 45, defects 6 and 7: ``results.png``, ``config.yaml`` and Lightning's ``metrics.csv`` and
``hparams.yaml`` were truncated and written in place (a kill mid-write left half a file), and
``--resume`` of a run killed during its first checkpoint write told the user to pass the folder
they had just passed, leaving the ~10 MB temporary file behind.
"""

from __future__ import annotations

import csv
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import fast_fit_args, tiny_root
from tests.faults.matrix import record

# Records every open for writing of a final path under LUCID_WATCH_WRITES (an atomic write creates
# its ``.<name>.<random>.tmp`` with os.open and renames it: it never opens the final path).
WATCH_WRITES = '''
import builtins, io, os
if os.environ.get("LUCID_WATCH_WRITES"):
    _root = os.path.realpath(os.environ["LUCID_WATCH_WRITES"])
    _log = os.environ["LUCID_WRITES_LOG"]
    _real = builtins.open

    def _note(file, mode):
        if isinstance(file, int) or not any(c in str(mode) for c in "wax+"):
            return
        path = os.path.realpath(os.fsdecode(file))
        name = os.path.basename(path)
        if not path.startswith(_root + os.sep) or (name.startswith(".") and name.endswith(".tmp")):
            return
        fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (os.path.relpath(path, _root) + "\\n").encode())
        finally:
            os.close(fd)

    def _open(file, mode="r", *args, **kwargs):
        _note(file, mode)
        return _real(file, mode, *args, **kwargs)

    builtins.open = _open
    io.open = _open
'''

APPEND_ONLY = "events.out.tfevents."
"""TensorBoard's event file: an append-only record stream (see docs/DECISIONS.md), not rewritten."""


def _watched_fit(tmp: Path, *extra: str, epochs: int = 2):
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(WATCH_WRITES)
    log = tmp / "writes.txt"
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "LUCID_WATCH_WRITES": str(tmp / "runs"), "LUCID_WRITES_LOG": str(log),
    }
    root = tmp / "data"
    if not root.exists():
        tiny_root("det", root)
    r = run_lucid(*fast_fit_args("det", root, tmp / "runs", epochs=epochs), *extra, env=env, cwd=tmp)
    written = set(log.read_text().split()) if log.exists() else set()
    return r, {w for w in written if not Path(w).name.startswith(APPEND_ONLY)}


@pytest.mark.slow
def test_every_file_of_a_run_folder_is_written_atomically_and_a_resume_keeps_metrics_csv(tmp_path):
    r, in_place = _watched_fit(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "runs" / "version_0"
    # nothing under the run folder was opened for writing under its final name
    assert in_place == set(), f"written in place (a kill mid-write leaves them truncated): {sorted(in_place)}"
    names = {p.name for p in run.iterdir()}
    assert {"config.yaml", "results.png", "results.csv", "metrics.csv"} <= names
    assert "hparams.yaml" not in names  # always `{}`: lucid logs no Lightning hyperparameters
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted({int(r["epoch"]) for r in rows}) == [0, 1] and all(r["step"] for r in rows)
    assert any(r.get("train/box_loss") for r in rows) and any(r.get("val/mAP50-95") for r in rows)

    # a resume keeps the rows of the epochs its checkpoint holds (Lightning's logger deleted the file)
    # and drops those of the epoch it re-runs; simulated: the run "stopped" with 2 of 4 epochs done
    import torch

    for name in ("last.ckpt", "best.ckpt"):
        ckpt = torch.load(run / "checkpoints" / name, weights_only=True)
        ckpt["lucid"]["config"]["trainer"]["max_epochs"] = 4
        torch.save(ckpt, run / "checkpoints" / name)
    with open(run / "metrics.csv", "a", newline="") as f:  # what the killed run logged of its epoch 2
        f.write(",".join("2" if k == "epoch" else "" for k in rows[0]) + "\n")
    r = run_lucid("fit", "det", "--resume", str(run), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(run / "metrics.csv", newline="") as f:
        after = list(csv.DictReader(f))
    assert sorted({int(r["epoch"]) for r in after}) == [0, 1, 2, 3]
    assert len([r for r in after if int(r["epoch"]) == 2]) == len([r for r in rows if int(r["epoch"]) == 1])
    assert after[: len(rows)] == [{k: r.get(k, "") for k in after[0]} for r in rows]


@pytest.mark.slow
def test_resume_of_a_run_killed_in_its_first_save_removes_the_temporary_and_says_how_to_start_again(tmp_path):
    """What a SIGKILL during the first checkpoint write leaves: a run folder whose checkpoints/ holds one temporary."""
    root = tiny_root("det", tmp_path / "data")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "runs" / "version_0"
    for ckpt in (run / "checkpoints").iterdir():
        ckpt.unlink()
    for name in ("results.csv", "results.png", "metrics.csv"):  # the first epoch never ended
        (run / name).unlink(missing_ok=True)
    stale = run / "checkpoints" / ".last.ckpt.abc123.tmp"
    stale.write_bytes(os.urandom(1 << 20))
    old = time.time() - 3600  # long untouched: abandoned even where the filesystem has no locks
    os.utime(stale, (old, old))

    r = run_lucid("fit", "det", "--resume", str(run), cwd=tmp_path)
    err = " ".join(r.stderr.split())
    config = run / "config.yaml"
    message = f"The run in {run} was stopped before its first checkpoint was saved: there is nothing to resume."
    command = f"lucid fit det -c {config}"
    ok = (r.returncode == 2 and message in err and f"Start it again: `{command}`" in err
          and "The unfinished checkpoint file it left (1.0 MB) was removed." in err
          and not stale.exists() and "Traceback" not in err)
    record("fit det", "SIGKILL in the first save, then resume", r.returncode, ok,
           "refused: nothing saved; the temporary is removed")
    assert r.returncode == 2, r.stderr[-3000:]
    assert message in err, err
    assert "Traceback" not in err
    assert not stale.exists(), "the temporary of the interrupted save is still there"
    assert f"Start it again: `{command}`" in err and "The unfinished checkpoint file it left (1.0 MB) was removed." in err
    assert "pass the run's version folder" not in err.lower()

    # the command given starts the run again, in a new version folder
    start = run_lucid(*command.split()[1:], cwd=tmp_path)
    assert start.returncode == 0, start.stderr[-3000:]
    assert (tmp_path / "runs" / "version_1" / "checkpoints" / "last.ckpt").is_file()
    shutil.rmtree(tmp_path / "runs" / "version_1")
