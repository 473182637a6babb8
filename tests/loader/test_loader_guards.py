"""Worker count under the /dev/shm budget, thread pinning, pin_memory, worker deaths."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from torch.utils.data import Dataset

from lucidyolo.data.loader import (
    EpochSampler,
    GuardedDataLoader,
    WorkerDiedError,
    build_train_loader,
    resolve_num_workers,
    resolve_val_num_workers,
    worker_init_fn,
)
from lucidyolo.data.shm import batch_nbytes, shm_free_bytes
from lucidyolo.errors import UserError

GB = 1 << 30


def test_auto_workers_is_batch_or_cores_when_shm_is_plentiful():
    assert resolve_num_workers(None, 16, 640, cores=8, free_shm=100 * GB, ranks=1) == 8
    assert resolve_num_workers(None, 4, 640, cores=8, free_shm=100 * GB, ranks=1) == 4


def test_auto_workers_fit_half_the_free_shm():
    bb = batch_nbytes(64, 640)  # ~79 MB uint8
    free = 2 * 3 * 2 * bb  # half of it holds 3 workers x prefetch 2
    assert resolve_num_workers(None, 64, 640, prefetch_factor=2, cores=16, free_shm=free, ranks=1) == 3
    # float32 transport (device HSV) costs 4x: the cap shrinks
    assert resolve_num_workers(None, 64, 640, float_images=True, cores=16, free_shm=free, ranks=1) == 1
    # a tiny /dev/shm still gets one worker; no /dev/shm means no cap
    assert resolve_num_workers(None, 64, 640, cores=16, free_shm=64 << 20, ranks=1) == 1
    assert resolve_num_workers(None, 64, 640, cores=16, free_shm=None, ranks=1) == 16


def test_ranks_on_one_host_share_cores_and_shm(monkeypatch):
    bb = batch_nbytes(64, 640)
    free = 2 * 8 * 2 * bb  # room for 8 workers on one rank
    assert resolve_num_workers(None, 64, 640, cores=16, free_shm=free, ranks=1) == 8
    assert resolve_num_workers(None, 64, 640, cores=16, free_shm=free, ranks=4) == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert resolve_num_workers(None, 64, 640, cores=16, free_shm=free) == 2


def test_a_named_worker_count_is_honoured():
    assert resolve_num_workers(12, 64, 640, cores=2, free_shm=1) == 12
    assert resolve_num_workers(0, 64, 640) == 0
    with pytest.raises(UserError):
        resolve_num_workers(-1, 8, 640)


def test_inherited_validation_workers_are_bounded_with_a_warning():
    bb = batch_nbytes(32, 640)
    free = 2 * 10 * 2 * bb  # budget: 10 workers x prefetch 2
    train_pool = 8 * 2 * bb  # the training queue keeps 8 of them
    with pytest.warns(UserWarning, match=r"Validation uses 2 loader workers instead of 8.*val_num_workers"):
        assert resolve_val_num_workers(8, None, 32, 640, train_pool_bytes=train_pool, free_shm=free, ranks=1) == 2
    assert resolve_val_num_workers(8, 6, 32, 640, train_pool_bytes=train_pool, free_shm=free, ranks=1) == 6
    assert resolve_val_num_workers(2, None, 32, 640, free_shm=free, ranks=1) == 2
    assert resolve_val_num_workers(0, None, 32, 640, free_shm=free, ranks=1) == 0


def test_shm_probe_reads_this_host():
    free = shm_free_bytes()
    assert free is None or free >= 0
    assert shm_free_bytes("/definitely/not/here") is None


class _ThreadsDataset(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        return torch.tensor([torch.get_num_threads(), torch.initial_seed() % 1000003])


def test_workers_run_one_torch_thread_and_distinct_seeds():
    loader = torch.utils.data.DataLoader(_ThreadsDataset(), batch_size=1, num_workers=2, worker_init_fn=worker_init_fn)
    rows = torch.cat(list(loader))
    assert (rows[:, 0] == 1).all()
    assert rows[0, 1] != rows[1, 1]  # worker 0 and worker 1 got different seeds


class _DyingDataset(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, item):
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_by_the_os_becomes_a_user_error_with_advice():
    loader = GuardedDataLoader(_DyingDataset(), batch_size=2, num_workers=1)
    with pytest.raises(WorkerDiedError) as exc:
        next(iter(loader))
    msg = str(exc.value)
    assert isinstance(exc.value, UserError)
    assert ("killed by signal" in msg or "exited unexpectedly" in msg) and "/dev/shm" in msg and "--data.num_workers 0" in msg


def test_loader_defaults_pin_only_with_cuda_and_do_not_persist(tmp_path):
    from lucidyolo.data.datasets import TrainDataset
    from tests.augment.scenes import rect_source

    ds = TrainDataset(rect_source(tmp_path, "det"), 64)
    loader = build_train_loader(ds, 2, num_workers=1)
    assert loader.pin_memory is torch.cuda.is_available()
    assert loader.persistent_workers is False and loader.prefetch_factor == 2
    assert build_train_loader(ds, 2, num_workers=0, pin_memory=True).pin_memory is torch.cuda.is_available()


def test_epoch_sampler_shards_ranks_and_reshuffles_per_epoch():
    s0 = EpochSampler(10, seed=1, rank=0, world_size=3)
    s1 = EpochSampler(10, seed=1, rank=1, world_size=3)
    s2 = EpochSampler(10, seed=1, rank=2, world_size=3)
    idx = [i for s in (s0, s1, s2) for _, i in s]
    assert len(idx) == 12 and set(idx) == set(range(10)) and len(s0) == 4
    first = [i for _, i in s0]
    s0.set_epoch(1)
    assert [e for e, _ in s0] == [1] * 4 and [i for _, i in s0] != first
