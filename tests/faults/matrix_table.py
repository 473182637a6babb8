"""Render ``docs/fault-matrix.md`` from the cells the fault tests recorded, or check it against them.

``.ci/run`` sets ``LUCID_FAULT_MATRIX_DIR``, runs the suite, and then fails when the document differs
from what the suite just observed, so the table cannot go stale::

    LUCID_FAULT_MATRIX_DIR=/tmp/matrix .venv/bin/pytest -n 2
    .venv/bin/python -m tests.faults.matrix_table /tmp/matrix --write docs/fault-matrix.md
    .venv/bin/python -m tests.faults.matrix_table /tmp/matrix --check docs/fault-matrix.md
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

FAULTS = ("SIGINT", "SIGTERM", "SIGKILL, then again", "disk full", "read-only root", "missing input", "corrupt input")
"""The grid's columns: the faults every command meets."""
AGAIN = {"SIGKILL, then resume": "resume", "SIGKILL, then rerun": "rerun"}
"""A run resumes after SIGKILL, other commands run again: one column."""

HEADER = """# Fault matrix

Every command under every fault ends with exit 130 (SIGINT), 143 (SIGTERM) or 2 (a refused write, a bad
input) and one message, and loses nothing: a run resumes from its last finished epoch, outputs are whole
files or absent, inputs are untouched. Full and read-only filesystems are real (a tmpfs or a read-only bind
mount in a private mount namespace). The tests are in `tests/faults/` and beside the features they fault.

This file is generated: every cell below is one a test checked and recorded, and `.ci/run` fails when
the file differs from what the suite it just ran observed (`tests/faults/matrix_table.py`).
"""


def _result(c: dict) -> str:
    if c["rc"] is None:
        return c["note"] or "n/a"
    how = f"{c['how']}: " if "how" in c else ""
    return f"{'pass' if c['passed'] else '**FAIL**'} ({how}exit {c['rc']})"


def render(cells: list[dict]) -> str:
    """The document for ``cells`` (dicts of command, fault, rc, passed, note); the same cells, the same text."""
    cells = [{**c, "fault": "SIGKILL, then again", "how": AGAIN[c["fault"]]} if c["fault"] in AGAIN else c for c in cells]
    grid = [c for c in cells if c["fault"] in FAULTS]
    other = [c for c in cells if c["fault"] not in FAULTS]
    commands = sorted({c["command"] for c in grid}, key=lambda c: (not c.startswith("fit"), c))
    faults = [f for f in FAULTS if any(c["fault"] == f for c in grid)]
    by = {(c["command"], c["fault"]): c for c in grid}
    lines = [HEADER, "| command | " + " | ".join(faults) + " |", "|---|" + "---|" * len(faults)]
    for cmd in commands:
        row = [_result(by[(cmd, f)]) if (cmd, f) in by else "-" for f in faults]
        lines.append(f"| `lucid {cmd}` | " + " | ".join(row) + " |")
    notes = sorted({(c.get("how", c["fault"]), c["note"]) for c in grid if c["note"] and c["rc"] is not None})
    if notes:
        lines += [""] + [f"- {f}: {n}." for f, n in notes]
    if other:
        lines += ["", "## Other faults", "", "| command | fault | result | what is left |", "|---|---|---|---|"]
        for c in sorted({(c["command"], c["fault"]): c for c in other}.values(), key=lambda c: (c["command"], c["fault"])):
            lines.append(f"| `lucid {c['command']}` | {c['fault']} | {_result(c)} | {c['note'] or '-'} |")
    return "\n".join(lines) + "\n"


def read_cells(folder: Path) -> list[dict]:
    """Every cell the test processes wrote to ``folder`` (one JSON list per pytest worker)."""
    return [c for p in sorted(folder.glob("*.json")) for c in json.loads(p.read_text())]


def check(cells: list[dict], doc: Path) -> str | None:
    """None when ``doc`` is what ``cells`` render to, else a message with the difference and the fix."""
    want, have = render(cells), doc.read_text() if doc.exists() else ""
    if want == have:
        return None
    diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True), f"{doc} (committed)",
                                        f"{doc} (observed by this run)"))
    failed = [c for c in cells if not c["passed"]]
    why = (f"{len(failed)} cell(s) failed; " if failed else "") + "the document is not what the suite observed"
    return (f"{why}:\n{diff}\nIf the change is right, regenerate it: `LUCID_FAULT_MATRIX_DIR=/tmp/m .venv/bin/pytest "
            f"-n 2 && .venv/bin/python -m tests.faults.matrix_table /tmp/m --write {doc}`.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="LUCID_FAULT_MATRIX_DIR of a suite run")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", type=Path, help="write the document here")
    mode.add_argument("--check", type=Path, help="exit 1 when this document differs from the recorded cells")
    args = ap.parse_args(argv)
    cells = read_cells(args.folder)
    if not cells:
        print(f"fault matrix: no cells recorded in {args.folder}", file=sys.stderr)
        return 1
    if args.check is not None:
        problem = check(cells, args.check)
        if problem is not None:
            print(f"fault matrix: {problem}", file=sys.stderr)
            return 1
        print(f"fault matrix: {args.check} matches the {len(cells)} cells this run recorded")
        return 0
    text = render(cells)
    if args.write is not None:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
