"""The trainer's settings: the automatic precision, and deterministic runs without the NaN fill."""

from __future__ import annotations

import torch

from lucidyolo.config.resolve import resolve_config
from lucidyolo.engine.loop.trainer_factory import (
    precision_note,
    resolve_precision,
    skip_uninitialized_fill,
)
from lucidyolo.tasks.registry import get_task


def _cfg(**trainer):
    return resolve_config(get_task("det"), [], {"trainer": {"accelerator": "cpu", **trainer}})


def test_auto_precision_is_bf16_mixed_only_where_bfloat16_is_native(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert resolve_precision(_cfg(), cuda=False).trainer.precision == "bf16-mixed"  # the default is auto
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert resolve_precision(_cfg(), cuda=False).trainer.precision == "32-true"  # emulated bfloat16 is slower than float32


def test_named_precisions_pass_through(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    for named in ("32-true", "bf16-mixed", "16-mixed", "64-true"):
        assert resolve_precision(_cfg(precision=named), cuda=False).trainer.precision == named


def test_precision_note_names_what_auto_chose_and_the_way_back():
    line = precision_note("auto", "bf16-mixed")
    assert line is not None and "bf16-mixed" in line and "--trainer.precision 32-true" in line
    assert precision_note("auto", "32-true") is None  # nothing to explain
    assert precision_note("bf16-mixed", "bf16-mixed") is None  # the user chose it


def test_an_emulated_cuda_bfloat16_is_not_native(monkeypatch):
    from lucidyolo.optim.musgd import native_bf16_matmul

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # true under emulation too
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (7, 5))
    assert native_bf16_matmul(torch.device("cuda")) is False
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert native_bf16_matmul(torch.device("cuda")) is True


def test_deterministic_runs_skip_the_uninitialised_fill(monkeypatch):
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    skip_uninitialized_fill()
    assert torch.utils.deterministic.fill_uninitialized_memory is False
