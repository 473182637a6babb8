"""Render ``docs/fault-matrix.md`` from the cells the fault tests recorded.

    LUCID_FAULT_MATRIX_DIR=/tmp/matrix .venv/bin/pytest -n 2 tests/faults
    .venv/bin/python -m tests.faults.matrix_table /tmp/matrix > docs/fault-matrix.md
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import date
from pathlib import Path

FAULTS = ("SIGINT", "SIGTERM", "SIGKILL, then again", "disk full", "read-only root", "missing input", "corrupt input")
AGAIN = {"SIGKILL, then resume": "resume", "SIGKILL, then rerun": "rerun"}
"""A run resumes after SIGKILL, other commands run again: one column."""


def render(cells: list[dict]) -> str:
    cells = [{**c, "fault": "SIGKILL, then again", "how": AGAIN[c["fault"]]} if c["fault"] in AGAIN else c for c in cells]
    commands = sorted({c["command"] for c in cells}, key=lambda c: (not c.startswith("fit"), c))
    faults = [f for f in FAULTS if any(c["fault"] == f for c in cells)]
    by = {(c["command"], c["fault"]): c for c in cells}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# Fault matrix",
        "",
        "Every command under every fault ends with exit 130 (SIGINT), 143 (SIGTERM) or 2 (a refused write, a bad",
        "input) and one message, and loses nothing: a run resumes from its last finished epoch, outputs are whole",
        "files or absent, inputs are untouched. Full and read-only filesystems are real (a tmpfs or a read-only bind",
        "mount in a private mount namespace). The tests are in `tests/faults/`; this table is rendered from the cells",
        "they recorded (`tests/faults/matrix_table.py`).",
        "",
        f"Last result: {date.today().isoformat()}, commit {commit}, {platform.machine()}, Python {platform.python_version()}.",
        "",
        "| command | " + " | ".join(faults) + " |",
        "|---|" + "---|" * len(faults),
    ]
    for cmd in commands:
        row = []
        for f in faults:
            c = by.get((cmd, f))
            if c is None:
                row.append("-")
            elif c["rc"] is None:
                row.append(c["note"] or "n/a")
            else:
                how = f"{c['how']}: " if "how" in c else ""
                row.append(f"{'pass' if c['passed'] else '**FAIL**'} ({how}exit {c['rc']})")
        lines.append(f"| `lucid {cmd}` | " + " | ".join(row) + " |")
    notes = sorted({(c.get("how", c["fault"]), c["note"]) for c in cells if c["note"] and c["rc"] is not None})
    if notes:
        lines += [""] + [f"- {f}: {n}." for f, n in notes]
    return "\n".join(lines) + "\n"


def main(folder: str) -> None:
    cells = [c for p in sorted(Path(folder).glob("*.json")) for c in json.loads(p.read_text())]
    sys.stdout.write(render(cells))


if __name__ == "__main__":
    main(sys.argv[1])
