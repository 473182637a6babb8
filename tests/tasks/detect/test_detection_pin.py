"""Detection's loss on a fixed batch is pinned across the task-seam refactor.

The expected numbers were produced by the detection code before it moved onto
the task seam (commit ce9c5bc, ``DetectionSystem`` era, its ``DetectionCriterion()``)
from exactly these head outputs and targets; the refactor must not change them.

The head outputs are seeded random tensors, not a model's: the first version of
this pin fed a seeded nano model's outputs, and the model's layout has since
changed (the published YOLO26 layout) while the objective has not. The pre-seam
code was rerun on the inputs below (it still reproduced the first pin, total
21.4227, from its own model) to record these numbers.
"""

from __future__ import annotations

import pytest
import torch

from lucidyolo.structures.box_coder import make_anchors
from lucidyolo.tasks.detect.spec import DetectModelConfig
from lucidyolo.tasks.registry import get_task

BEFORE_THE_MOVE = {"total": 185.03672790527344, "box": 0.581212043762207, "cls": 318.84954833984375,
                   "l1": 3.542144536972046}


def _head_outputs() -> dict:
    """Two 128 x 128 images' worth of anchors (strides 8, 16, 32), 4 classes, both branches seeded."""
    g = torch.Generator().manual_seed(7)
    anchors, strides = make_anchors([(16, 16), (8, 8), (4, 4)], [8, 16, 32])
    a = anchors.shape[0]

    def branch() -> dict:
        return {"boxes": torch.rand(2, a, 4, generator=g) * 3 + 0.2,
                "logits": torch.randn(2, a, 4, generator=g) * 1.5 - 2}

    return {"o2m": branch(), "o2o": branch(), "anchors": anchors, "strides": strides}


def test_detection_loss_on_a_fixed_batch_is_unchanged_by_the_seam():
    criterion = get_task("det").build_criterion(cfg=DetectModelConfig(), num_classes=4, meta={})
    gt = {
        "boxes": torch.tensor([[[10., 12., 60., 70.], [70., 20., 120., 90.], [0, 0, 0, 0]],
                               [[30., 30., 50., 44.], [0, 0, 0, 0], [0, 0, 0, 0]]]),
        "labels": torch.tensor([[0, 3, 0], [2, 0, 0]]),
        "mask": torch.tensor([[True, True, False], [True, False, False]]),
    }
    gt["difficult"] = torch.zeros_like(gt["mask"])
    with torch.no_grad():
        total, terms = criterion(_head_outputs(), gt, 0.8)
    got = {"total": float(total), **{k: float(terms[k]) for k in ("box", "cls", "l1")}}
    assert got == pytest.approx(BEFORE_THE_MOVE, rel=1e-5)
    assert int(terms["o2m/num_fg"]) == 25 and int(terms["o2o/num_fg"]) == 3  # the pre-seam run's positives
