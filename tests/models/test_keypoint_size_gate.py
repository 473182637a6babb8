"""Keypoint size gate: every variant against the paper's pose table (1 class, 17 points, 640 px)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucidyolo.engine.summary import task_model_summary

GOLDEN = json.loads((Path(__file__).with_name("keypoint_size_golden.json")).read_text())
VARIANTS = list(GOLDEN["variants"])


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    # No dataset: the summary builds the model from the task's reference meta (17 points).
    return {v: task_model_summary("pose", v, GOLDEN["num_classes"], GOLDEN["img_size"]) for v in VARIANTS}


def _interval(paper: float, rel_tol: float) -> tuple[float, float]:
    r = GOLDEN["paper_rounding"]
    return (paper - r) * (1 - rel_tol), (paper + r) * (1 + rel_tol)


@pytest.mark.parametrize("variant", VARIANTS)
def test_on_the_paper_budget(variant: str, summaries: dict[str, dict]) -> None:
    row, s = GOLDEN["variants"][variant], summaries[variant]
    lo, hi = _interval(row["paper_params_m"], GOLDEN["params_rel_tol"])
    assert lo <= s["params"] / 1e6 <= hi, f"{s['params'] / 1e6:.3f} M outside [{lo:.3f}, {hi:.3f}]"
    lo, hi = _interval(row["paper_gflops"], GOLDEN["gflops_rel_tol"])
    assert lo <= s["gflops"] <= hi, f"{s['gflops']:.2f} GFLOPs outside [{lo:.2f}, {hi:.2f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_size_matches_recorded_measurement(variant: str, summaries: dict[str, dict]) -> None:
    row = GOLDEN["variants"][variant]
    assert summaries[variant]["params"] == row["measured_params"]
    assert summaries[variant]["gflops"] == pytest.approx(row["measured_gflops"], rel=1e-4)


def test_summary_is_the_keypoint_task_and_deploy_drops_o2m(summaries: dict[str, dict]) -> None:
    s = summaries["n"]
    assert s["task"] == "keypoints" and s["anchors"] == 8400
    assert s["params_deploy"] < s["params"]
