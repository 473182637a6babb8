"""Fault injection for `lucid fit` subprocesses: a shared-memory allocation in a loader worker fails or hangs.

The fault is injected through a ``sitecustomize`` module on the child's
``PYTHONPATH``, so the real console script runs unchanged. It wraps the one
place torch allocates a segment for a batch (``UntypedStorage._share_fd_cpu_``)
and, in loader workers only, once the file ``LUCID_FAULT_AFTER`` exists
(the run's ``last.ckpt``: the first finished epoch), does what torch does when
/dev/shm is full: leaves an empty ``/dev/shm/torch_<pid>_*`` file behind and
raises its "No space left on device" error (mode ``fail``), or leaves the file
and then never returns (mode ``block``: a loader the main process waits on).
Each firing appends ``<unix time> <pid> <file name>`` to ``LUCID_FAULT_FIRED``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN
from tests.task_fields import fields_of

SITECUSTOMIZE = '''
import os, time
if os.environ.get("LUCID_FAULT"):
    import torch
    from torch.utils.data import get_worker_info

    _real = torch.UntypedStorage._share_fd_cpu_

    def _faulty(self, *args, **kwargs):
        if get_worker_info() is None or not os.path.exists(os.environ["LUCID_FAULT_AFTER"]):
            return _real(self, *args, **kwargs)
        name = "torch_%d_%d_0" % (os.getpid(), time.time_ns() % 10**9)
        open(os.path.join("/dev/shm", name), "wb").close()
        with open(os.environ["LUCID_FAULT_FIRED"], "a") as f:
            f.write("%r %d %s\\n" % (time.time(), os.getpid(), name))
        if os.environ["LUCID_FAULT"] == "block":
            while True:
                time.sleep(1)
        raise RuntimeError("unable to allocate shared memory(shm) for file </%s>: No space left on device (28)" % name)

    torch.UntypedStorage._share_fd_cpu_ = _faulty
'''


def tiny_det_root(out: Path) -> Path:
    """8 training and 2 validation synthetic images of 64 px."""
    from lucidyolo.data.synth import write_synthetic

    return write_synthetic(out, fields_of("det"), 10, img_size=64, seed=0, fmt="coco", val_fraction=0.2)


def fault_env(tmp: Path, mode: str, after: Path) -> dict[str, str]:
    """Environment for a child whose loader workers fail (``fail``) or hang (``block``) once ``after`` exists."""
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "LUCID_FAULT": mode, "LUCID_FAULT_AFTER": str(after), "LUCID_FAULT_FIRED": str(tmp / "fired.txt"),
    }


def start_lucid(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start the console script in its own process group (signals to it never reach pytest)."""
    full = {**os.environ, "COLUMNS": "200", **env}
    return subprocess.Popen(
        [str(BIN / "lucid"), *args], env=full, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    """Poll ``predicate`` every 20 ms; fail with ``what`` (and the child's output) after ``timeout`` s."""
    end = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"lucid ended (rc {proc.returncode}) before {what}:\n{err[-3000:]}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def wait_exit(proc: subprocess.Popen, timeout: float) -> tuple[float, str, str]:
    """Wait for the child; returns (unix time it was seen ended, stdout, stderr). Kills its group on timeout."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"lucid still running after {timeout} s:\n{err[-3000:]}") from None
    return time.time(), out, err


def group_alive(proc: subprocess.Popen) -> bool:
    """Whether any process of the child's process group (its loader workers included) still exists."""
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL whatever is left of the child's process group (test clean-up)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def fired(tmp: Path) -> list[tuple[float, int, str]]:
    """The fault firings so far: (unix time, worker pid, leftover file name)."""
    path = tmp / "fired.txt"
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [(float(t), int(p), n) for t, p, n in rows]


def tiny_root(task: str, out: Path, images: int = 8) -> Path:
    """A tiny synthetic set of ``task`` (64 px, a quarter of it validation), made by the task's own hook."""
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    assert spec.make_synthetic is not None, f"task {task} has no synthetic set"
    return spec.make_synthetic(out, images, 64, 0)


def fast_fit_args(task: str, root: Path, runs: Path, epochs: int = 1) -> tuple[str, ...]:
    """``lucid fit`` arguments for a seconds-long run of ``task`` on a :func:`tiny_root` set."""
    return (
        "fit", task, "--data-root", str(root), "--data.img_size", "64", "--data.batch_size", "4",
        "--trainer.max_epochs", str(epochs), "--trainer.default_root_dir", str(runs),
    )


def private_mounts_available() -> bool:
    """Whether this process may mount filesystems in a private mount namespace (``unshare -m``, root)."""
    import shutil

    if shutil.which("unshare") is None:
        return False
    probe = "mount -t tmpfs -o size=1m tmpfs /mnt 2>/dev/null || mount -t tmpfs -o size=1m tmpfs /tmp"
    return subprocess.run(["unshare", "-m", "sh", "-c", probe], capture_output=True).returncode == 0


def _needs_mounts():
    import pytest

    return pytest.mark.skipif(not private_mounts_available(), reason="needs root for a private mount namespace "
                              "(unshare -m) to make a real full or read-only filesystem")


def in_mount_namespace(script: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the ``sh`` ``script`` in a private mount namespace (its mounts vanish with it; needs root).

    Tests mount a small tmpfs (``mount -t tmpfs -o size=40m tmpfs DIR``: a real ENOSPC) or bind a folder
    read-only onto itself (``mount --bind D D && mount -o remount,bind,ro D``: a real EROFS), run
    ``lucid`` there, and copy what must survive to a folder outside the mount before the script ends.
    """
    env = {**os.environ, "COLUMNS": "200", "LUCID": str(BIN / "lucid")}
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)
