"""The rotated training path runs in float32 only: no op anywhere in forward, assignment, loss or backward
produces a float64 tensor (issue 12: "float32 throughout")."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _Float64Spy(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                self.ops.add(str(func))
        return out


def test_a_rotated_training_step_creates_no_float64_tensor():
    from lucidyolo.tasks.registry import get_task

    spec = get_task("obb")
    cfg = spec.config_model.model_validate({"task": "obb", "num_classes": 3})
    model = spec.build_model(cfg=cfg, num_classes=3, meta={})
    criterion = spec.build_criterion(cfg=cfg, num_classes=3, meta={})
    gt = {
        "rboxes": torch.tensor([[[40.0, 30.0, 30.0, 6.0, 0.4], [20.0, 44.0, 12.0, 10.0, -0.6]]]),
        "boxes": torch.tensor([[[26.0, 22.0, 54.0, 38.0], [13.0, 37.0, 27.0, 51.0]]]),
        "labels": torch.tensor([[0, 2]]), "mask": torch.tensor([[True, True]]),
        "difficult": torch.zeros(1, 2, dtype=torch.bool),
    }
    spy = _Float64Spy()
    with spy:
        total, terms = criterion(model(torch.rand(1, 3, 64, 64)), gt, 0.5)
        total.backward()
        spec.decode(model.eval()(torch.rand(1, 3, 64, 64)), "nms")
    assert spy.ops == set(), sorted(spy.ops)
    assert total.dtype == torch.float32 and torch.isfinite(total)
    assert float(terms["o2m/num_fg"]) > 0  # the step assigned something: the check covered the loss terms
