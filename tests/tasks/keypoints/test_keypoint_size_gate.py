"""Keypoint size gate: every variant against the paper's pose table (1 class, 17 points, 640 px)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lucidyolo.engine.commands.summary import task_model_summary
from lucidyolo.tasks.registry import get_task
from tests.models.paper_size import interval, paper_quantities

GOLDEN = json.loads((Path(__file__).with_name("keypoint_size_golden.json")).read_text())
VARIANTS = list(GOLDEN["variants"])


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    # No dataset: the summary builds the model from the task's reference meta (17 points).
    return {v: task_model_summary("pose", v, GOLDEN["num_classes"], GOLDEN["img_size"]) for v in VARIANTS}


def _deployed_params_m(variant: str) -> float:
    spec = get_task("pose")
    cfg = spec.config_model.model_validate({"task": spec.name, "variant": variant})
    with torch.device("meta"):
        model = spec.build_model(cfg=cfg, num_classes=GOLDEN["num_classes"],
                                 meta={"num_keypoints": GOLDEN["num_keypoints"]})
    return paper_quantities(model.eval(), GOLDEN["img_size"])["params_m"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_on_the_paper_budget(variant: str, summaries: dict[str, dict]) -> None:
    row, s = GOLDEN["variants"][variant], summaries[variant]
    params_m = _deployed_params_m(variant)
    lo, hi = interval(row["paper_params_m"], GOLDEN["paper_rounding"])
    assert lo <= params_m <= hi, f"deployed {params_m:.3f} M outside [{lo:.3f}, {hi:.3f}]"
    lo, hi = interval(row["paper_gflops"], GOLDEN["paper_rounding"], GOLDEN["gflops_rel_tol"])
    assert lo <= s["gflops"] <= hi, f"{s['gflops']:.2f} GFLOPs outside [{lo:.2f}, {hi:.2f}]"


def test_summary_is_the_keypoint_task_and_deploy_drops_o2m(summaries: dict[str, dict]) -> None:
    s = summaries["n"]
    assert s["task"] == "keypoints" and s["anchors"] == 8400
    assert s["params_deploy"] < s["params"]
