"""Validation is float32 under any training precision: forward, loss, decode and the metric update."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("task", ["det", "seg"])
def test_validation_step_runs_everything_with_autocast_off(monkeypatch, task):
    import lucidyolo.engine.loop.system as system_module
    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.engine.loop.build import build_system
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    torch.manual_seed(0)
    system = build_system(spec, resolve_config(spec), 2, ["a", "b"])
    system.eval()
    images = torch.rand(2, 3, 64, 64)
    gt = {"boxes": torch.tensor([[[4.0, 4.0, 30.0, 30.0]], [[10.0, 10.0, 50.0, 40.0]]]),
          "labels": torch.tensor([[1], [0]]), "mask": torch.tensor([[True], [True]])}
    seen: dict[str, object] = {}

    def record(metric, outputs, decoded, gt, batch_meta):
        # what a metric's own tensor work (seg: coefficients x prototypes) would run under
        seen["autocast"] = torch.is_autocast_enabled("cpu")
        seen["dtypes"] = {t.dtype for t in _tensors(decoded)}

    monkeypatch.setattr(system_module, "unpack", lambda batch, device: batch)
    monkeypatch.setattr(system, "metric_update", record)
    monkeypatch.setattr(system, "log_dict", lambda *a, **k: None)
    monkeypatch.setattr(system, "criterion", _NoLoss())  # the task's loss wants its own fields; not under test
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what Lightning's bf16-mixed wraps the step in
        system.validation_step((images, gt, {}), 0)
    assert seen["autocast"] is False
    assert seen["dtypes"] and seen["dtypes"] <= {torch.float32, torch.int64, torch.bool}


class _NoLoss(torch.nn.Module):
    def forward(self, outputs, gt, alpha):
        return torch.zeros(()), {}


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            yield from _tensors(getattr(obj, name))
