"""Size gate: every detection variant sits on the YOLO26 paper's table (the quantities it measures: paper_size.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lucidyolo.models import create_model, list_models
from lucidyolo.models.summary import model_summary
from tests.models.paper_size import interval, paper_quantities

GOLDEN = json.loads((Path(__file__).with_name("size_golden.json")).read_text())
VARIANTS = [name.removeprefix("yolo26") for name in list_models()]
ROUNDING = GOLDEN["paper_rounding"]


def test_golden_covers_every_registered_variant() -> None:
    assert sorted(GOLDEN["variants"]) == sorted(VARIANTS)


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    return {v: model_summary(v, num_classes=GOLDEN["num_classes"], img_size=GOLDEN["img_size"]) for v in VARIANTS}


@pytest.fixture(scope="module")
def paper() -> dict[str, dict]:
    out = {}
    for v in VARIANTS:
        with torch.device("meta"):
            model = create_model(v, num_classes=GOLDEN["num_classes"])
        out[v] = paper_quantities(model.eval(), GOLDEN["img_size"])
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_params_are_the_papers_to_its_rounding(variant: str, paper: dict[str, dict]) -> None:
    lo, hi = interval(GOLDEN["variants"][variant]["paper_params_m"], ROUNDING)
    params_m = paper[variant]["params_m"]
    assert lo <= params_m <= hi, f"{variant}: deployed {params_m:.3f}M outside [{lo:.3f}, {hi:.3f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_convolution_gflops_are_the_papers_to_its_rounding(variant: str, paper: dict[str, dict]) -> None:
    lo, hi = interval(GOLDEN["variants"][variant]["paper_gflops"], ROUNDING)
    gflops = paper[variant]["conv_gflops"]
    assert lo <= gflops <= hi, f"{variant}: {gflops:.3f} conv GFLOPs outside [{lo:.3f}, {hi:.3f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_deploy_gflops_within_paper_budget(variant: str, summaries: dict[str, dict]) -> None:
    """The summary's GFLOPs (convolutions and attention products, spec 20-model) within the spec's +-5 %."""
    lo, hi = interval(GOLDEN["variants"][variant]["paper_gflops"], ROUNDING, GOLDEN["gflops_rel_tol"])
    gflops = summaries[variant]["gflops"]
    assert lo <= gflops <= hi, f"{variant}: {gflops:.2f} GFLOPs outside [{lo:.2f}, {hi:.2f}]"


@pytest.mark.parametrize("variant", VARIANTS)
def test_summary_deploy_params_within_paper_budget(variant: str, summaries: dict[str, dict]) -> None:
    """The summary's deployed count (BatchNorm not folded yet) within the spec's +-2 %."""
    lo, hi = interval(GOLDEN["variants"][variant]["paper_params_m"], ROUNDING, GOLDEN["params_rel_tol"])
    params_m = summaries[variant]["params_deploy"] / 1e6
    assert lo <= params_m <= hi, f"{variant}: {params_m:.3f}M outside [{lo:.3f}, {hi:.3f}]"


def test_deploy_graph_drops_o2m_branch(summaries: dict[str, dict]) -> None:
    s = summaries["n"]
    assert s["params_deploy"] < s["params"]
    assert s["anchors"] == 8400
