"""The fault matrix's record: every cell a test checks is written out when ``LUCID_FAULT_MATRIX_DIR`` is set.

Each pytest(-xdist) worker writes ``<dir>/<worker>.json``; ``python -m
tests.faults.matrix_table <dir>`` renders ``docs/fault-matrix.md`` from them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.faults.matrix import CELLS


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get("LUCID_FAULT_MATRIX_DIR")
    if not out or not CELLS:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / f"{worker}.json").write_text(json.dumps(CELLS, indent=1))
