"""Warmup + linear decay schedule stepped per optimizer step."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.errors import ConfigError
from lucidyolo.optim import MuSGD, scaled_lr, warmup_linear_schedule


def _lrs(
    warmup: int, total: int, lrf: float, lr0: float = 0.1, steps: int | None = None
) -> list[float]:
    p = torch.nn.Parameter(torch.zeros(2))
    opt = MuSGD([p], lr=lr0)
    sched = warmup_linear_schedule(opt, warmup, total, lrf)
    seen = []
    for _ in range(steps if steps is not None else total):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return seen


def test_warmup_is_step_plus_one_over_warmup_then_linear_decay_to_lrf() -> None:
    lrs = _lrs(warmup=4, total=10, lrf=0.01, lr0=0.1)
    assert lrs[:4] == pytest.approx([0.025, 0.05, 0.075, 0.1])
    assert lrs[4] == pytest.approx(0.1)
    assert lrs[-1] == pytest.approx(0.001)  # lr0 * lrf at the last optimizer step
    decay = lrs[4:]
    diffs = [a - b for a, b in zip(decay, decay[1:], strict=False)]
    assert diffs == pytest.approx([diffs[0]] * len(diffs))  # linear


def test_zero_warmup_and_constant_lr() -> None:
    assert _lrs(warmup=0, total=5, lrf=0.5)[0] == pytest.approx(0.1)
    assert _lrs(warmup=0, total=6, lrf=1.0, steps=9) == pytest.approx([0.1] * 9)


def test_lr_stays_at_the_floor_after_the_last_step_and_groups_keep_their_ratio() -> None:
    assert _lrs(warmup=2, total=6, lrf=0.1, steps=9)[-4:] == pytest.approx([0.01] * 4)
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    opt = MuSGD([{"params": [a], "lr": 0.2}, {"params": [b], "lr": 0.02}])
    warmup_linear_schedule(opt, 4, 10, 0.01)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.05, 0.005])


@pytest.mark.parametrize(
    ("warmup", "total", "lrf"), [(-1, 10, 0.01), (0, 0, 0.01), (2, 10, 0.0), (2, 10, 1.5)]
)
def test_bad_schedule_settings_raise_config_errors(warmup, total, lrf) -> None:
    opt = MuSGD([torch.nn.Parameter(torch.zeros(2))])
    with pytest.raises(ConfigError):
        warmup_linear_schedule(opt, warmup, total, lrf)


def test_lr_scales_linearly_with_batch_from_64() -> None:
    assert scaled_lr(0.01, 64) == pytest.approx(0.01)
    assert scaled_lr(0.01, 16) == pytest.approx(0.0025)
    with pytest.raises(ConfigError):
        scaled_lr(0.01, 0)
