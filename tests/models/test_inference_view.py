"""The inference views decode like the training model: same rows (and task outputs) on every built-in task."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.models.inference_view import inference_model

TASKS = [("det", {}), ("seg", {}), ("obb", {}), ("keypoints", {"num_keypoints": 5})]


def _close(got, want, where):
    if isinstance(want, dict):
        assert set(got) >= set(want), (where, set(want) - set(got))
        for k in want:
            _close(got[k], want[k], f"{where}.{k}")
        return
    assert got.shape == want.shape, where
    assert torch.allclose(got, want, atol=1e-3, rtol=1e-3), (where, float((got - want).abs().max()))


@pytest.mark.parametrize(("task", "meta"), TASKS, ids=[t for t, _ in TASKS])
def test_views_decode_like_the_model(task, meta):
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    torch.manual_seed(0)
    cfg = spec.config_model.model_validate({"task": spec.name, "num_classes": 3, **meta})
    model = spec.build_model(cfg=cfg, num_classes=3, meta=meta)
    # BN statistics away from the identity so that folding is really exercised
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    model.eval()
    x = torch.rand(2, 3, 96, 96)
    with torch.inference_mode():
        ref = model(x)
        e2e = inference_model(model, ("e2e",))(x)
        both = inference_model(model, ("e2e", "nms"))(x)
        # the decode hooks take the views' outputs (rows compared by shape: untrained scores tie)
        assert spec.decode(e2e, "e2e").__class__ is spec.decode(ref, "e2e").__class__
    # what decode reads, per anchor: the o2o branch (e2e view), both branches (the folded model), extras
    want_e2e = {k: v for k, v in ref.items() if k != "o2m" and (k != "semantic")}
    _close(e2e, want_e2e, task)
    assert "o2m" not in e2e
    _close(both, {k: v for k, v in ref.items()}, task)
    assert not any(p.requires_grad for p in inference_model(model, ("e2e",)).parameters())
    assert model.training is False and any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())  # untouched


def test_a_plugins_plain_conv_and_batchnorm_are_folded_and_what_cannot_be_is_counted():
    """A Sequential's Conv2d + BatchNorm2d folds (same output); a BatchNorm applied in a forward the module
    tree does not show stays, and is counted, so a report never claims a fold that did not happen."""
    import torch
    from torch import nn

    from lucidyolo.models.fuse import fold_batchnorm, unfolded_batchnorms

    class Hidden(nn.Module):  # bn registered before conv, applied after: the order is the forward's alone
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm2d(4)
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.bn(self.conv(x))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.SiLU(), Hidden())
    for bn in (model[1], model[3].bn):  # non-trivial statistics
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
    model.eval()
    x = torch.rand(2, 3, 16, 16)
    want = model(x)
    folded = fold_batchnorm(model)
    assert isinstance(folded[1], nn.Identity) and folded[0].bias is not None
    assert unfolded_batchnorms(folded) == 1  # Hidden's
    assert torch.allclose(folded(x), want, atol=1e-5)
