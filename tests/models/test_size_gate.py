"""Size gate: every variant's params and GFLOPs sit on the YOLO26 paper's table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucidyolo.models import list_models
from lucidyolo.models.summary import model_summary

GOLDEN = json.loads((Path(__file__).with_name("size_golden.json")).read_text())
VARIANTS = [name.removeprefix("yolo26") for name in list_models()]


def _interval(paper: float, rounding: float, rel_tol: float) -> tuple[float, float]:
    return (paper - rounding) * (1 - rel_tol), (paper + rounding) * (1 + rel_tol)


def test_golden_covers_every_registered_variant() -> None:
    assert sorted(GOLDEN["variants"]) == sorted(VARIANTS)


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    return {v: model_summary(v, num_classes=GOLDEN["num_classes"], img_size=GOLDEN["img_size"]) for v in VARIANTS}


@pytest.mark.parametrize("variant", VARIANTS)
def test_params_within_paper_budget(variant: str, summaries: dict[str, dict]) -> None:
    row = GOLDEN["variants"][variant]
    lo, hi = _interval(row["paper_params_m"], GOLDEN["paper_rounding"], GOLDEN["params_rel_tol"])
    params_m = summaries[variant]["params"] / 1e6
    assert lo <= params_m <= hi, f"{variant}: {params_m:.3f}M outside [{lo:.3f}, {hi:.3f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_deploy_gflops_within_paper_budget(variant: str, summaries: dict[str, dict]) -> None:
    row = GOLDEN["variants"][variant]
    lo, hi = _interval(row["paper_gflops"], GOLDEN["paper_rounding"], GOLDEN["gflops_rel_tol"])
    gflops = summaries[variant]["gflops"]
    assert lo <= gflops <= hi, f"{variant}: {gflops:.2f} GFLOPs outside [{lo:.2f}, {hi:.2f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_size_matches_recorded_measurement(variant: str, summaries: dict[str, dict]) -> None:
    """Pins the architecture: any change to a block shows up here and needs a deliberate regeneration."""
    row, tol = GOLDEN["variants"][variant], GOLDEN["measured_rel_tol"]
    assert summaries[variant]["params"] == row["measured_params"]
    assert summaries[variant]["gflops"] == pytest.approx(row["measured_gflops"], rel=tol, abs=1e-4)


def test_deploy_graph_drops_o2m_branch(summaries: dict[str, dict]) -> None:
    s = summaries["n"]
    assert s["params_deploy"] < s["params"]
    assert s["anchors"] == 8400
