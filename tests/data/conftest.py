"""Fixtures for the data tests: synthetic roots and the `lucid data` console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lucidyolo.data.synth import write_synthetic
from tests.task_fields import fields_of

BIN = Path(sys.executable).parent


def run_data_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `lucid data ARGS` through the installed console script, as a user would."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([str(BIN / "lucid"), "data", *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """Factory: cached synthetic root for (task, fmt)."""
    cache: dict[tuple, Path] = {}

    def make(task: str, fmt: str = "coco", n: int = 10, size: int = 128, **kw) -> Path:
        key = (task, fmt, n, size, tuple(sorted(kw.items())))
        if key not in cache:
            out = tmp_path_factory.mktemp(f"synth-{task}-{fmt}") / "root"
            cache[key] = write_synthetic(out, fields_of(task), n, size, seed=0, fmt=fmt, **kw)
        return cache[key]

    return make
