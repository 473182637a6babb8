"""Segmentation size gate: the n row against the paper (2.7 M / 9.0 GFLOPs), every variant pinned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucidyolo.engine.summary import task_model_summary

GOLDEN = json.loads((Path(__file__).with_name("seg_size_golden.json")).read_text())
VARIANTS = list(GOLDEN["variants"])


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    return {v: task_model_summary("seg", v, GOLDEN["num_classes"], GOLDEN["img_size"]) for v in VARIANTS}


def _interval(paper: float, rel_tol: float) -> tuple[float, float]:
    r = GOLDEN["paper_rounding"]
    return (paper - r) * (1 - rel_tol), (paper + r) * (1 + rel_tol)


def test_nano_on_the_paper_budget(summaries: dict[str, dict]) -> None:
    row, s = GOLDEN["variants"]["n"], summaries["n"]
    lo, hi = _interval(row["paper_params_m"], GOLDEN["params_rel_tol"])
    assert lo <= s["params"] / 1e6 <= hi, f"{s['params'] / 1e6:.3f} M outside [{lo:.3f}, {hi:.3f}]"
    lo, hi = _interval(row["paper_gflops"], GOLDEN["gflops_rel_tol"])
    assert lo <= s["gflops"] <= hi, f"{s['gflops']:.2f} GFLOPs outside [{lo:.2f}, {hi:.2f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_size_matches_recorded_measurement(variant: str, summaries: dict[str, dict]) -> None:
    row = GOLDEN["variants"][variant]
    assert summaries[variant]["params"] == row["measured_params"]
    assert summaries[variant]["gflops"] == pytest.approx(row["measured_gflops"], rel=1e-4)


def test_semantic_head_is_training_only(summaries: dict[str, dict]) -> None:
    """The deployed graph drops the o2m branch and the semantic head (80 x C3 + 80 weights at n)."""
    from lucidyolo.engine.summary import task_model_summary as det_summary

    seg, det = summaries["n"], det_summary("det", "n", 80, 640)
    assert seg["params_deploy"] < seg["params"]
    assert seg["gflops"] > det["gflops"]  # prototypes are in the deployed graph
    assert seg["task"] == "seg" and seg["anchors"] == 8400
