"""200-step single-batch overfit of the n model: objective + MuSGD + clip wire up and learn."""

from __future__ import annotations

import math

import pytest
import torch

from lucidyolo.losses.criterion import DetectionCriterion
from lucidyolo.models import create_model
from lucidyolo.optim import MuSGD, warmup_linear_schedule
from tests.losses.synthetic_batch import synthetic_batch


@pytest.mark.slow
def test_n_model_overfits_one_batch_in_200_steps() -> None:
    torch.manual_seed(0)
    model = create_model("n", num_classes=4).train()
    images, targets = synthetic_batch(batch=2, size=128)
    criterion = DetectionCriterion()
    opt = MuSGD(model.parameters(), lr=0.01)
    sched = warmup_linear_schedule(opt, warmup_steps=0, total_steps=200, lrf=1.0)  # constant lr
    losses = []
    for _ in range(200):
        total, _ = criterion(model(images), targets, 0.8)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        sched.step()
        losses.append(total.item())
    assert all(math.isfinite(v) for v in losses)
    assert all(p.grad is not None for p in model.parameters())
    tail = sum(losses[-10:]) / 10
    assert tail < 0.3 * losses[0], (losses[0], tail)
