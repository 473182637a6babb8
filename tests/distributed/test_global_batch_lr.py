"""The learning rate and the schedule follow the global batch: every node's processes count (issue 34, item 4)."""

from __future__ import annotations

import pytest

from lucidyolo.config.resolve import resolve_config
from lucidyolo.engine.loop.build import global_processes, local_ranks, resolve_schedule
from lucidyolo.tasks.registry import get_task


def _cfg(**trainer: object):
    return resolve_config(
        get_task("det"),
        overrides={
            "trainer": {"max_epochs": 10, **trainer},
            "data": {"batch_size": 8},
            "optim": {"lr": 0.04, "lr_reference_batch": 64, "lr_scaling": "linear"},
        },
    )


@pytest.mark.parametrize(
    ("trainer", "env", "processes", "per_node"),
    [
        ({"devices": 1}, {}, 1, 1),
        ({"devices": 2}, {}, 2, 2),
        (
            {"devices": 8, "num_nodes": 4},
            {},
            32,
            8,
        ),  # SLURM / Lightning's own count: devices x nodes
        (
            {"devices": 1, "num_nodes": 2},
            {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"},
            2,
            1,
        ),  # torchrun, 2 nodes x 1
        (
            {"devices": "auto"},
            {"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"},
            16,
            8,
        ),  # a launcher's world only
    ],
)
def test_the_global_batch_counts_every_node(monkeypatch, trainer, env, processes, per_node):
    for key in ("WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = _cfg(**trainer)
    assert global_processes(cfg, cuda=False) == processes
    _, recipe = resolve_schedule(cfg, 1024, global_processes(cfg, cuda=False))
    # linear scaling: 0.04 at batch 64; batch 8 per process, so the global batch is 8 x processes
    assert recipe.lr == pytest.approx(0.04 * 8 * processes / 64)
    # optimizer steps per epoch: the images are shared by every process
    assert recipe.total_steps == 10 * -(-1024 // (8 * processes))
    # /dev/shm and the worker plan stay per node
    assert local_ranks(cfg, cuda=False) == per_node
