"""The default recipe's rule: spec values on long runs, capped shares of short ones; explicit numbers pass through."""

from __future__ import annotations

import pytest

from lucidyolo.optim.recipe import resolve_recipe, scale_lr


def _resolve(epochs: int, steps: int, batch: int, **explicit):
    values = {"lr": 0.01, "lr_reference_batch": 64, "lr_scaling": "auto", "warmup_epochs": "auto", "ema_tau": "auto",
              "close_mosaic": "auto", **explicit}
    return resolve_recipe(epochs=epochs, steps_per_epoch=steps, global_batch=batch, **values)


def test_a_coco_length_run_gets_the_spec_values():
    # 300 epochs of COCO train2017 at batch 64: 1849 steps an epoch
    r = _resolve(300, 1849, 64)
    assert (r.lr, r.lr_scaling, r.warmup_epochs, r.ema_tau, r.close_mosaic) == (0.01, "linear", 3.0, 2000.0, 10)


def test_the_shapes_benchmark_run_gets_capped_shares():
    # 30 epochs of 64 images at batch 8 = 8 steps an epoch, 240 steps: warmup 3 % = 7.2 steps = 0.9 epochs,
    # EMA tau a quarter of the steps = 60, mosaic off for 1/6 of the epochs = 5
    r = _resolve(30, 8, 8)
    assert r.total_steps == 240 and (r.lr, r.lr_scaling) == (0.01, "none")
    assert r.warmup_epochs == pytest.approx(0.9)
    assert r.ema_tau == pytest.approx(60.0)
    assert r.close_mosaic == 5


def test_explicit_numbers_pass_through():
    r = _resolve(30, 8, 8, warmup_epochs=1.0, ema_tau=200.0, close_mosaic=7, lr_scaling="linear")
    assert (r.warmup_epochs, r.ema_tau, r.close_mosaic, r.lr) == (1.0, 200.0, 7, pytest.approx(0.00125))


def test_linear_scaling_above_the_reference_batch():
    assert scale_lr(0.01, 128, 64, "auto") == (pytest.approx(0.02), "linear")
    assert scale_lr(0.01, 16, 64, "linear") == (pytest.approx(0.0025), "linear")
    assert scale_lr(0.01, 16, 64, "auto") == (0.01, "none")  # not scaled down below the reference batch
    with pytest.raises(ValueError):
        scale_lr(0.01, 16, 64, "sqrt")
