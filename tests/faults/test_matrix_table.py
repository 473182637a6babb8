"""The fault matrix document is rendered from recorded cells, and the CI check fails when they differ."""

from __future__ import annotations

import json

from tests.faults.matrix_table import check, main, render

CELLS = [
    {"command": "fit det", "fault": "SIGINT", "rc": 130, "passed": True, "note": ""},
    {"command": "fit det", "fault": "SIGKILL, then resume", "rc": 0, "passed": True, "note": "resume ends all 6 epochs"},
    {"command": "data check", "fault": "disk full", "rc": None, "passed": True, "note": "n/a: writes nothing"},
    {"command": "predict", "fault": "a decompression bomb", "rc": 2, "passed": False, "note": ""},
]


def test_the_grid_and_the_other_faults_are_laid_out_from_the_cells():
    text = render(CELLS)
    assert "| command | SIGINT | SIGKILL, then again | disk full |\n|---|---|---|---|\n" in text
    assert "| `lucid fit det` | pass (exit 130) | pass (resume: exit 0) | - |\n" in text  # fit rows first
    assert "| `lucid data check` | - | - | n/a: writes nothing |\n" in text
    assert "- resume: resume ends all 6 epochs.\n" in text
    assert "| `lucid predict` | a decompression bomb | **FAIL** (exit 2) | - |\n" in text
    assert render(list(reversed(CELLS))) == text  # the order the workers recorded in does not matter


def test_the_check_passes_on_its_own_rendering_and_names_every_difference(tmp_path, capsys):
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "gw0.json").write_text(json.dumps(CELLS[:2]))
    (tmp_path / "cells" / "gw1.json").write_text(json.dumps(CELLS[2:]))
    doc = tmp_path / "fault-matrix.md"
    assert main([str(tmp_path / "cells"), "--write", str(doc)]) == 0
    assert main([str(tmp_path / "cells"), "--check", str(doc)]) == 0
    stale = doc.read_text().replace("pass (exit 130)", "pass (exit 143)")
    doc.write_text(stale)
    assert main([str(tmp_path / "cells"), "--check", str(doc)]) == 1
    err = capsys.readouterr().err
    assert "1 cell(s) failed" in err and "-| `lucid fit det` | pass (exit 143)" in err and "--write" in err
    missing = [c for c in CELLS if c["command"] != "data check"]  # a cell the suite no longer observes
    assert "-| `lucid data check`" in (check(missing, doc) or "")
    assert main([str(tmp_path / "nothing")]) == 1  # no cells recorded is an error, not an empty table
