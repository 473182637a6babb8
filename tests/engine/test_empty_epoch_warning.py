"""An epoch whose training batches held no instance is named at its end (for tasks whose targets are instances)."""

from __future__ import annotations

from types import SimpleNamespace

import torch


def _batch(instances: int) -> SimpleNamespace:
    return SimpleNamespace(labels=torch.zeros(instances, dtype=torch.int64))


def test_an_epoch_without_instances_is_named_and_one_with_any_is_not():
    from lucidyolo.engine.loop.empty_targets import EmptyEpochWarning

    lines: list[str] = []
    warn = EmptyEpochWarning(lines.append)
    trainer = SimpleNamespace(current_epoch=2, is_global_zero=True)
    warn.on_train_epoch_start(trainer, None)
    for i in range(3):
        warn.on_train_batch_start(trainer, None, _batch(0), i)
    warn.on_train_epoch_end(trainer, None)
    assert len(lines) == 1 and "epoch 3: none of its 3 training batches held an instance" in lines[0]
    warn.on_train_epoch_start(trainer, None)
    warn.on_train_batch_start(trainer, None, _batch(0), 0)
    warn.on_train_batch_start(trainer, None, _batch(2), 1)
    warn.on_train_epoch_end(trainer, None)
    assert len(lines) == 1


def test_fit_adds_the_warning_for_instance_tasks_only():
    from lucidyolo.engine.loop.empty_targets import EmptyEpochWarning
    from lucidyolo.engine.loop.fit import _empty_epoch_warning
    from lucidyolo.tasks.registry import get_task

    assert [type(c) for c in _empty_epoch_warning(get_task("det"), print)] == [EmptyEpochWarning]
    assert _empty_epoch_warning(get_task("cls"), print) == []  # one label per image, no instances by design
