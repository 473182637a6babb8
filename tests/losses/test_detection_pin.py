"""Detection's loss on a fixed batch is pinned across the task-seam refactor.

The expected numbers were produced by the detection code before it moved onto
the task seam (commit ce9c5bc, ``DetectionSystem`` era) from exactly this
model seed, batch and criterion; the refactor must not change them.
"""

from __future__ import annotations

import pytest
import torch

from lucidyolo.models import create_model
from lucidyolo.tasks.detect.spec import DetectModelConfig
from lucidyolo.tasks.registry import get_task

BEFORE_THE_MOVE = {"total": 21.42261505126953, "box": 0.4878005087375641, "cls": 16.813343048095703,
                   "l1": 1.5595734119415283}


def test_detection_loss_on_a_fixed_batch_is_unchanged_by_the_seam():
    torch.manual_seed(0)
    model = create_model("n", num_classes=4).train()
    criterion = get_task("det").build_criterion(cfg=DetectModelConfig(), num_classes=4, meta={})
    g = torch.Generator().manual_seed(1)
    images = torch.rand(2, 3, 128, 128, generator=g)
    gt = {
        "boxes": torch.tensor([[[10., 12., 60., 70.], [70., 20., 120., 90.], [0, 0, 0, 0]],
                               [[30., 30., 50., 44.], [0, 0, 0, 0], [0, 0, 0, 0]]]),
        "labels": torch.tensor([[0, 3, 0], [2, 0, 0]]),
        "mask": torch.tensor([[True, True, False], [True, False, False]]),
    }
    gt["difficult"] = torch.zeros_like(gt["mask"])
    with torch.no_grad():
        total, terms = criterion(model(images), gt, 0.8)
    got = {"total": float(total), **{k: float(terms[k]) for k in ("box", "cls", "l1")}}
    assert got == pytest.approx(BEFORE_THE_MOVE, rel=1e-5)
