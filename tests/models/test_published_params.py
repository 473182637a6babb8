"""The whole model of every task x variant has the published YOLO26 layout's parameter count.

The counts in ``published_params.json`` are the publisher's (copied from the reference layouts, source named
in the file), not measurements of lucid: a change to any block, stem or width of lucid's model shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from lucidyolo.tasks.registry import get_task

GOLDEN = json.loads((Path(__file__).with_name("published_params.json")).read_text())
TASKS = {"det": "det", "seg": "seg", "obb": "obb", "keypoints": "keypoints"}  # golden key -> lucid task


def _build(task: str, variant: str) -> nn.Module:
    spec = get_task(task)
    cfg = spec.config_model.model_validate({"task": spec.name, "variant": variant})
    with torch.device("meta"):
        return spec.build_model(cfg=cfg, num_classes=GOLDEN["num_classes"],
                                meta={**spec.reference_meta, "num_keypoints": GOLDEN["num_keypoints"]})


def _publisher_count(model: nn.Module) -> int:
    """Float state-dict entries except BatchNorm running statistics: the publisher's count, which includes
    the keypoint flow's fixed base and masks (lucid's buffers ``loc``, ``cov``, ``mask``)."""
    return sum(
        t.numel() for name, t in model.state_dict().items()
        if t.is_floating_point() and not name.endswith(("running_mean", "running_var"))
    )


@pytest.mark.parametrize("variant", ["n", "s", "m", "l", "x"])
@pytest.mark.parametrize("task", list(TASKS))
def test_whole_model_params_are_the_published_layouts(task: str, variant: str) -> None:
    model = _build(TASKS[task], variant)
    assert _publisher_count(model) == GOLDEN[task][variant]
    params = sum(p.numel() for p in model.parameters())
    if task == "keypoints":
        flow = model.aux["flow"]
        assert params == GOLDEN[task][variant] - flow.loc.numel() - flow.cov.numel() - flow.mask.numel()
    else:
        assert params == GOLDEN[task][variant]
