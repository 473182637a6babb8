"""`lucid gate overfit`: the det and seg wiring gates pass their floors on CPU; unbuilt tasks refuse honestly."""

from __future__ import annotations

import json

import pytest


def test_gate_for_a_task_without_a_training_path_exits_2(lucid):
    r = lucid("gate", "overfit", "--task", "oriented")
    assert r.returncode == 2 and "is not available" in r.stderr and "Traceback" not in r.stderr


# Gate wall times measured on the 2-core CPU (README, Measured): det 676-908 s on a
# CPU shared with other jobs, seg 307 s. run_lucid's default 600 s limit would kill a
# passing det run; the limits leave room for a busier box and still stop a hung run.
GATES = [("det", 0.95, 1020), ("segment", 0.70, 720)]


@pytest.mark.slow
@pytest.mark.parametrize(("task", "floor", "timeout"), GATES, ids=[g[0] for g in GATES])
def test_gate_passes_its_floor(tmp_path, lucid, task, floor, timeout):
    r = lucid("gate", "overfit", "--task", task, "--json", "--workdir", str(tmp_path), cwd=tmp_path, timeout=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(lines[-1])
    assert result["floor"] == floor
    assert result["value"] >= result["floor"], result
    assert r.returncode == 0
