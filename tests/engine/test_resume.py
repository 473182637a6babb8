"""A run killed after an epoch resumes from last.ckpt and ends exactly where an uninterrupted run ends."""

from __future__ import annotations

import os

import pytest
import pytorch_lightning as pl

pytestmark = pytest.mark.slow


class _Crash(Exception):
    pass


class _CrashAtEpoch(pl.Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == self.epoch:
            raise _Crash("simulated kill")


def _cfg(tmp_path, name):
    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.tasks.registry import get_task

    spec = get_task("det")
    cfg = resolve_config(
        spec, [],
        {"trainer": {"max_epochs": 3, "default_root_dir": str(tmp_path / name)},
         "data": {"img_size": 96, "batch_size": 4, "num_workers": 0, "synthetic_images": 12},
         "optim": {"warmup_epochs": 1}},
    )
    return spec, cfg


def test_resume_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    import torch

    from lucidyolo.engine.loop.fit import run_fit

    monkeypatch.setenv("LUCIDYOLO_CACHE_DIR", str(tmp_path / "cache"))
    environment, threads = dict(os.environ), torch.get_num_threads()
    spec, cfg = _cfg(tmp_path, "straight")
    straight = run_fit(spec, cfg)
    # the caller gets its process back: a later fit measures the machine again, a `lucid` it starts inherits nothing
    assert dict(os.environ) == environment and torch.get_num_threads() == threads

    spec, cfg = _cfg(tmp_path, "killed")
    with pytest.raises(_Crash):
        run_fit(spec, cfg, extra_callbacks=[_CrashAtEpoch(2)])
    run_dir = tmp_path / "killed" / "version_0"
    assert torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 1
    resumed = run_fit(spec, cfg, resume=run_dir)

    a = straight["system"].model.state_dict()
    b = resumed["system"].model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=f"parameter {k} differs after resume")
    ema_a = torch.load(straight["run_dir"] / "checkpoints" / "last.ckpt", weights_only=True)["lucid_ema"]
    ema_b = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["lucid_ema"]
    assert ema_a["updates"] == ema_b["updates"]
    # bit-equal although the engine turns off torch's NaN fill of uninitialised memory (trainer_factory)
    assert torch.are_deterministic_algorithms_enabled() and not torch.utils.deterministic.fill_uninitialized_memory
    for k in ema_a["shadow"]:
        torch.testing.assert_close(ema_a["shadow"][k], ema_b["shadow"][k], rtol=0, atol=0)
