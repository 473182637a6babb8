"""Fixtures for the data tests: synthetic roots and the `lucid data` console script."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lucidyolo.data.synth import write_synthetic

BIN = Path(sys.executable).parent


@functools.cache
def _lucid_has_data() -> bool:
    lucid = BIN / "lucid"
    if not lucid.exists():
        return False
    r = subprocess.run([str(lucid), "data", "--help"], capture_output=True, text=True, timeout=60)
    return r.returncode == 0


def run_data_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `lucid data ARGS` (or `python -m lucidyolo.cli.data ARGS` until the lead registers it)."""
    env = dict(os.environ, COLUMNS="200")
    cmd = [str(BIN / "lucid"), "data"] if _lucid_has_data() else [sys.executable, "-m", "lucidyolo.cli.data"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """Factory: cached synthetic root for (task, fmt)."""
    cache: dict[tuple, Path] = {}

    def make(task: str, fmt: str = "coco", n: int = 10, size: int = 128, **kw) -> Path:
        key = (task, fmt, n, size, tuple(sorted(kw.items())))
        if key not in cache:
            out = tmp_path_factory.mktemp(f"synth-{task}-{fmt}") / "root"
            cache[key] = write_synthetic(out, task, n, size, seed=0, fmt=fmt, **kw)
        return cache[key]

    return make
