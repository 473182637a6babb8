"""Shared test helpers: the real console script, real data location, marker skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _share_the_cores_between_workers() -> None:
    """Give each pytest-xdist worker its share of the cores as torch threads, before torch is imported.

    Each worker (and every ``lucid`` it starts, which inherits the variable) would
    otherwise run torch's OpenMP pool at the machine's full width: two workers on
    2 cores then oversubscribe them and spin in each other's barriers. Measured on
    2 cores: the det gate ran past its 1200 s limit beside the 2-thread
    single-batch overfit test, against ~290 s alone. A thread count set by the
    caller wins.
    """
    # torch-free: the engine's own core count
    from lucidyolo.data.worker_plan import available_cores

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, available_cores() // workers))


_share_the_cores_between_workers()


def _own_label_index() -> None:
    """Keep the label indexes the suite writes out of the user's cache: one throw-away folder per process."""
    import atexit
    import shutil
    import tempfile

    if "LUCIDYOLO_INDEX_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="lucid-test-index-")
        os.environ["LUCIDYOLO_INDEX_DIR"] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)


_own_label_index()


def real_data_root() -> Path | None:
    """``../shared/data`` beside the repo, or ``LUCID_REAL_DATA``; None when absent."""
    env = os.environ.get("LUCID_REAL_DATA")
    root = Path(env) if env else REPO.parent / "shared" / "data"
    return root if root.is_dir() else None


def run_lucid(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 600):
    """Run the installed ``lucid`` console script in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.setdefault("COLUMNS", "200")
    full_env.update(env or {})
    return subprocess.run(
        [str(BIN / "lucid"), *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout
    )


@pytest.fixture
def lucid():
    return run_lucid


def _suite_order(item) -> tuple[bool, bool]:
    """Longest tests first: the slow tests of modules that set ``RUN_FIRST`` (the gates), then the other slow tests.

    With ``--maxschedchunk 1`` (pyproject's addopts) pytest-xdist keeps two tests queued per worker
    and hands out the rest one at a time as workers free up, so longest-first is the classic
    longest-processing-time schedule: the gates start at once on both workers and the short tests
    fill in behind them. In collection order the gates came last, in one worker's chunk, and ran
    one after another while the other worker sat idle (measured: a 9-minute keypoint gate alone at
    the end of the run).
    """
    slow = item.get_closest_marker("slow") is not None
    first = slow and bool(getattr(getattr(item, "module", None), "RUN_FIRST", False))
    return (not first, not slow)


def pytest_collection_modifyitems(config, items):
    import importlib.util

    has_cuda = False
    if any("gpu" in item.keywords for item in items) and importlib.util.find_spec("torch") is not None:
        import torch

        has_cuda = torch.cuda.is_available()
    skip_gpu = pytest.mark.skip(reason="needs CUDA; none on this machine")
    skip_data = pytest.mark.skip(reason="real data folder ../shared/data (or LUCID_REAL_DATA) is absent")
    data = real_data_root()
    items.sort(key=_suite_order)
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)
        if "realdata" in item.keywords and data is None:
            item.add_marker(skip_data)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The fault matrix's record: with ``LUCID_FAULT_MATRIX_DIR`` set, the cells this process checked.

    Cells are recorded by tests anywhere in the suite (``tests.faults.matrix.record``); each pytest(-xdist)
    worker writes ``<dir>/<worker>.json`` and ``python -m tests.faults.matrix_table <dir>`` renders or
    checks ``docs/fault-matrix.md``.
    """
    import json

    out = os.environ.get("LUCID_FAULT_MATRIX_DIR")
    matrix = sys.modules.get("tests.faults.matrix")
    if not out or matrix is None or not matrix.CELLS:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{worker}.json").write_text(json.dumps(matrix.CELLS, indent=1))
