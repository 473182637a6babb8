"""Segmentation size gate: the n row against the paper (2.7 M / 9.0 GFLOPs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lucidyolo.engine.commands.summary import task_model_summary
from lucidyolo.tasks.segment import hooks as segment_hooks
from lucidyolo.tasks.segment.spec import SegmentModelConfig
from tests.models.paper_size import interval, paper_quantities

GOLDEN = json.loads((Path(__file__).with_name("seg_size_golden.json")).read_text())


@pytest.fixture(scope="module")
def summary() -> dict:
    return task_model_summary("seg", "n", GOLDEN["num_classes"], GOLDEN["img_size"])


def test_nano_on_the_paper_budget(summary: dict) -> None:
    row = GOLDEN["variants"]["n"]
    with torch.device("meta"):
        model = segment_hooks.build_model(SegmentModelConfig(variant="n"), num_classes=GOLDEN["num_classes"])
    params_m = paper_quantities(model.eval(), GOLDEN["img_size"])["params_m"]
    lo, hi = interval(row["paper_params_m"], GOLDEN["paper_rounding"])
    assert lo <= params_m <= hi, f"deployed {params_m:.3f} M outside [{lo:.3f}, {hi:.3f}]"
    lo, hi = interval(row["paper_gflops"], GOLDEN["paper_rounding"], GOLDEN["gflops_rel_tol"])
    assert lo <= summary["gflops"] <= hi, f"{summary['gflops']:.2f} GFLOPs outside [{lo:.2f}, {hi:.2f}]"


def test_semantic_head_is_training_only(summary: dict) -> None:
    """The deployed graph drops the o2m branch and the semantic head; the prototypes stay in it."""
    det = task_model_summary("det", "n", 80, 640)
    assert summary["params_deploy"] < summary["params"]
    assert summary["gflops"] > det["gflops"]  # prototypes are in the deployed graph
    assert summary["task"] == "seg" and summary["anchors"] == 8400
