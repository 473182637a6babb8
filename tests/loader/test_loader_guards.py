"""Thread pinning, pin_memory, sharding, and worker deaths and exceptions becoming user errors."""

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
    WorkerFailedError,
    build_train_loader,
    collate_for_transport,
    worker_init_fn,
)
from lucidyolo.data.shm import shm_free_bytes
from lucidyolo.errors import UserError


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
    idx = [i for s in (s0, s1, s2) for _, _, i in s]
    assert len(idx) == 12 and set(idx) == set(range(10)) and len(s0) == 4
    # positions number the padded epoch order once across ranks: they seed each sample's augmentation
    assert sorted(p for s in (s0, s1, s2) for _, p, _ in s) == list(range(12))
    first = [i for _, _, i in s0]
    s0.set_epoch(1)
    assert [e for e, _, _ in s0] == [1] * 4 and [i for _, _, i in s0] != first


class _RaisingDataset(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, item):
        if item >= 2:
            raise ValueError(f"corrupt label row in sample {item}")
        return torch.zeros(2)


def test_an_exception_in_a_worker_becomes_a_user_error_and_stops_the_workers():
    loader = GuardedDataLoader(_RaisingDataset(), batch_size=2, num_workers=2, worker_init_fn=worker_init_fn)
    it = iter(loader)
    next(it)
    with pytest.raises(WorkerFailedError) as exc:
        next(it)
    err = exc.value
    assert "ValueError: corrupt label row in sample 2" in err.what
    assert "__getitem__" in err.why and "--data.num_workers 0" in err.fix and "--resume" in err.fix
    assert all(not w.is_alive() for w in it._workers)


class _Images(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, item):
        return torch.full((3, 8, 8), item, dtype=torch.uint8)


def _collate(samples):
    return collate_for_transport([_Sample(s) for s in samples])


class _Sample:
    def __init__(self, image):
        from lucidyolo.structures.targets import Targets

        self.image, self.targets, self.index, self.orig_hw, self.letterbox, self.hsv_gains = (
            image, Targets.empty(), 0, (8, 8), (1.0, 0.0, 0.0), None,
        )


def test_a_full_shm_in_a_worker_ends_the_epoch_at_once_and_its_segment_is_removed(monkeypatch):
    """torch's allocation failure raised inside the worker's fetch, not lost in the queue's feeder thread.

    The fault is injected where torch allocates a segment, exactly as torch fails (message, and the
    ``/dev/shm/torch_<pid>_*`` file its error path leaves). Without the in-fetch allocation the batch
    would be dropped and the loader would wait for it until the 20 s timeout below.
    """
    import time
    from pathlib import Path

    real = torch.UntypedStorage._share_fd_cpu_
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm on this host")

    def full(self, *args, **kwargs):
        if torch.utils.data.get_worker_info() is None:
            return real(self, *args, **kwargs)
        name = f"torch_{os.getpid()}_4242_0"
        (shm / name).touch()
        raise RuntimeError(f"unable to allocate shared memory(shm) for file </{name}>: No space left on device (28)")

    monkeypatch.setattr(torch.UntypedStorage, "_share_fd_cpu_", full)
    loader = GuardedDataLoader(_Images(), batch_size=2, num_workers=1, worker_init_fn=worker_init_fn,
                               collate_fn=_collate, timeout=20)
    it = iter(loader)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as exc:
        next(it)
    assert time.monotonic() - start < 10
    err = exc.value
    assert "could not allocate shared memory" in err.what and "No space left on device" in err.what
    assert "/dev/shm" in err.why and "--shm-size" in err.fix and "--data.num_workers 0" in err.fix
    pid = it._workers[0].pid
    assert not list(shm.glob(f"torch_{pid}_*"))  # the worker's leftover segment is gone


def test_outside_the_loader_only_torchs_worker_messages_count():
    from lucidyolo.data.loader import worker_error

    oom = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB. Error code 12 (Cannot allocate memory)")
    assert worker_error(oom, in_loader=False) is None  # a training step out of RAM is not a /dev/shm problem
    assert isinstance(worker_error(oom), WorkerDiedError)  # ... but out of the loader itself it is
    died = worker_error(RuntimeError("DataLoader worker (pid(s) 4242) exited unexpectedly"), in_loader=False)
    assert isinstance(died, WorkerDiedError) and "4242" in died.what
    assert worker_error(ValueError("bad value"), in_loader=False) is None
