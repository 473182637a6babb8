"""The trainer's CPU settings: the bfloat16 hint on AMX CPUs, and deterministic runs without the NaN fill."""

from __future__ import annotations

import torch

from lucidyolo.config.resolve import resolve_config
from lucidyolo.engine.trainer_factory import bf16_hint, skip_uninitialized_fill
from lucidyolo.tasks.registry import get_task


def _cfg(**trainer):
    return resolve_config(get_task("det"), [], {"trainer": {"accelerator": "cpu", **trainer}})


def test_bf16_hint_only_for_a_float32_cpu_step_on_an_amx_cpu(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    line = bf16_hint(_cfg())
    assert line is not None and "--trainer.precision bf16-mixed" in line
    assert "--model.newton_schulz_dtype auto" in line
    nsd = resolve_config(get_task("det"), [], {"trainer": {"accelerator": "cpu"}, "model": {"newton_schulz_dtype": "auto"}})
    assert "newton_schulz_dtype" not in bf16_hint(nsd)  # already chosen
    assert bf16_hint(_cfg(precision="bf16-mixed")) is None  # already chosen
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert bf16_hint(_cfg()) is None


def test_deterministic_runs_skip_the_uninitialised_fill(monkeypatch):
    monkeypatch.setattr(torch.utils.deterministic, "fill_uninitialized_memory", True)
    skip_uninitialized_fill()
    assert torch.utils.deterministic.fill_uninitialized_memory is False
