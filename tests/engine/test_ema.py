"""ModelEMA: decay ramp, averaging of parameters and buffers, swap and checkpoint round trip."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn

from lucidyolo.engine.loop.ema import ModelEMA
from lucidyolo.errors import UserError


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 4 * 4, 2)
    )


def test_decay_ramps_from_zero_towards_the_asymptote() -> None:
    ema = ModelEMA(_net(), decay=0.9999, tau=2000)
    assert ema.current_decay(0) == 0.0
    assert ema.current_decay(2000) == pytest.approx(0.9999 * (1 - math.exp(-1)))
    assert ema.current_decay(100_000) == pytest.approx(0.9999, abs=1e-9)


def test_update_averages_float_params_and_buffers_and_copies_int_buffers() -> None:
    net = _net()
    ema = ModelEMA(net, decay=0.9, tau=2.0)
    start = {k: v.clone() for k, v in net.state_dict().items()}
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    net.train()(torch.randn(2, 3, 6, 6))  # changes BN running stats and num_batches_tracked
    ema.update(net)
    d = 0.9 * (1 - math.exp(-1 / 2.0))
    now = net.state_dict()
    for name, value in now.items():
        if value.is_floating_point():
            assert torch.allclose(ema.shadow[name], d * start[name] + (1 - d) * value, atol=1e-6), (
                name
            )
        else:
            assert torch.equal(ema.shadow[name], value), name
    assert ema.updates == 1


def test_swap_twice_restores_both_and_swapped_context_evaluates_the_average() -> None:
    net = _net()
    ema = ModelEMA(net, decay=0.5, tau=1.0)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(3.0)
    ema.update(net)
    live = {k: v.clone() for k, v in net.state_dict().items()}
    average = {k: v.clone() for k, v in ema.shadow.items()}
    with ema.swapped(net):
        for k, v in net.state_dict().items():
            assert torch.equal(v, average[k])
    for k, v in net.state_dict().items():
        assert torch.equal(v, live[k])
        assert torch.equal(ema.shadow[k], average[k])
    ema.copy_to(net)
    assert all(torch.equal(v, average[k]) for k, v in net.state_dict().items())


def test_state_dict_round_trips_through_a_weights_only_checkpoint() -> None:
    net = _net()
    ema = ModelEMA(net, decay=0.99, tau=10.0)
    with torch.no_grad():
        net[0].weight.add_(1.0)
    for _ in range(3):
        ema.update(net)
    buffer = io.BytesIO()
    torch.save(ema.state_dict(), buffer)
    buffer.seek(0)
    restored = ModelEMA(_net())
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert (restored.decay, restored.tau, restored.updates) == (0.99, 10.0, 3)
    assert all(torch.equal(restored.shadow[k], v) for k, v in ema.shadow.items())
    # The restored average keeps evolving identically.
    ema.update(net)
    restored.update(net)
    assert all(torch.equal(restored.shadow[k], v) for k, v in ema.shadow.items())


def test_loading_an_ema_of_another_model_is_a_user_error() -> None:
    ema = ModelEMA(_net())
    other = ModelEMA(nn.Sequential(nn.Linear(3, 3)))
    with pytest.raises(UserError, match="do not fit"):
        ema.load_state_dict(other.state_dict())
