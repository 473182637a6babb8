"""`lucid gate overfit`: the det wiring gate passes its floor on CPU; unbuilt tasks refuse honestly."""

from __future__ import annotations

import json

import pytest


def test_gate_for_a_task_without_a_training_path_exits_2(lucid):
    r = lucid("gate", "overfit", "--task", "oriented")
    assert r.returncode == 2 and "is not available" in r.stderr and "Traceback" not in r.stderr


# The gate's measured wall time is 676 s on the 2-core CPU shared with other jobs
# (README, Measured); run_lucid's default 600 s limit would kill that passing run.
# 1.5x the measurement leaves room for a busier box and still stops a hung run.
DET_GATE_TIMEOUT_S = 1020


@pytest.mark.slow
def test_det_gate_passes_its_floor(tmp_path, lucid):
    r = lucid(
        "gate", "overfit", "--task", "det", "--json", "--workdir", str(tmp_path), cwd=tmp_path,
        timeout=DET_GATE_TIMEOUT_S,
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(lines[-1])
    assert result["floor"] == 0.95
    assert result["value"] >= result["floor"], result
    assert r.returncode == 0


# Measured 307 s on the 2-core CPU (README, Measured); 2.3x leaves room for a busier box.
SEG_GATE_TIMEOUT_S = 720


@pytest.mark.slow
def test_seg_gate_passes_its_floor(tmp_path, lucid):
    r = lucid(
        "gate", "overfit", "--task", "segment", "--json", "--workdir", str(tmp_path), cwd=tmp_path,
        timeout=SEG_GATE_TIMEOUT_S,
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stdout[-2000:] + r.stderr[-2000:]
    result = json.loads(lines[-1])
    assert result["task"] == "seg" and result["floor"] == 0.70
    assert result["value"] >= result["floor"], result
    assert r.returncode == 0
