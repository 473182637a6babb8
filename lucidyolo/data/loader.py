"""DataLoader factory with the guards a real training run needs.

Three resources run out independently (data spec, "Batch transport"):
CPU threads (:func:`worker_init_fn` pins each worker to one torch thread),
/dev/shm bytes (:func:`resolve_num_workers` caps the automatic worker count,
:mod:`lucidyolo.data.shm`) and shm segments (:class:`PackedBatch` keeps the
tensor count per batch constant). A worker killed by the OS surfaces as
:class:`WorkerDiedError` with advice instead of a bare RuntimeError.
"""

from __future__ import annotations

import math
import os
import random
import warnings
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info

from lucidyolo.data.shm import batch_nbytes, local_world_size, shm_free_bytes, shm_worker_cap
from lucidyolo.errors import UserError
from lucidyolo.structures.fields import field_specs
from lucidyolo.structures.packed import PackedBatch, collate_packed

_DEATH_SIGNS = (
    "killed by signal",
    "exited unexpectedly",
    "Cannot allocate memory",
    "unable to mmap",
    "Too many open files",
    "unable to open shared memory",
    "No space left on device",
)


class WorkerDiedError(UserError):
    """A loader worker was killed by the OS or could not map shared memory."""


def worker_init_fn(worker_id: int) -> None:
    """Run in every worker at start: one torch thread, and per-worker, per-epoch seeds.

    torch's per-worker seed (``base_seed + worker_id``, the base drawn from
    the loader's seeded generator every epoch) seeds the global ``random``,
    numpy and torch RNGs for any third-party code; our own augmentation draws
    come from the dataset's explicit generators.
    """
    torch.set_num_threads(1)
    info = get_worker_info()
    seed = info.seed if info is not None else worker_id
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def resolve_num_workers(
    requested: int | None,
    batch_size: int,
    img_size: int,
    prefetch_factor: int = 2,
    float_images: bool = False,
    cores: int | None = None,
    free_shm: int | None | str = "probe",
    ranks: int | None = None,
) -> int:
    """Training worker count: a named count is honoured; ``None`` means automatic.

    Automatic: ``min(batch_size, cores per rank)``, capped so
    ``workers x prefetch x batch_bytes`` fits half the free /dev/shm divided by
    the ranks on this host; at least 1; hosts without /dev/shm are not capped.

    Args:
        requested: ``data.num_workers`` (``None`` = auto).
        batch_size: per-rank batch size.
        img_size: S.
        prefetch_factor: batches queued per worker.
        float_images: float32 transport (device HSV) instead of uint8.
        cores: override the detected core count (tests).
        free_shm: override the probed free /dev/shm (``None`` = no /dev/shm).
        ranks: override ``LOCAL_WORLD_SIZE``.
    """
    if requested is not None:
        if requested < 0:
            raise UserError(f"data.num_workers = {requested} is negative.", fix="Use 0 (main process) or a positive count.")
        return int(requested)
    ranks = local_world_size() if ranks is None else max(1, ranks)
    cores = available_cores() if cores is None else cores
    wanted = max(1, min(batch_size, max(1, cores // ranks)))
    free = shm_free_bytes() if free_shm == "probe" else free_shm
    cap = shm_worker_cap(batch_nbytes(batch_size, img_size, float_images), prefetch_factor, free, ranks)  # type: ignore[arg-type]
    return wanted if cap is None else min(wanted, cap)


def resolve_val_num_workers(
    inherited: int,
    val_num_workers: int | None,
    batch_size: int,
    img_size: int,
    prefetch_factor: int = 2,
    train_pool_bytes: int = 0,
    free_shm: int | None | str = "probe",
    ranks: int | None = None,
) -> int:
    """Validation worker count: ``data.val_num_workers`` wins; an inherited count is bounded.

    The validation pool spawns while the training pool is resident, so the
    inherited count must fit what the training queue leaves of the budget; a
    reduction is announced with a warning naming the number.
    """
    if val_num_workers is not None:
        return int(val_num_workers)
    if inherited <= 0:
        return 0
    ranks = local_world_size() if ranks is None else max(1, ranks)
    free = shm_free_bytes() if free_shm == "probe" else free_shm
    cap = shm_worker_cap(batch_nbytes(batch_size, img_size), prefetch_factor, free, ranks, reserved_bytes=train_pool_bytes)  # type: ignore[arg-type]
    if cap is not None and cap < inherited:
        warnings.warn(
            f"Validation uses {cap} loader workers instead of {inherited}: the training workers' "
            "queue already holds /dev/shm. Set data.val_num_workers to choose the number.",
            UserWarning,
            stacklevel=2,
        )
        return cap
    return inherited


class EpochSampler(Sampler[tuple[int, int]]):
    """Yields ``(epoch, index)`` pairs: the epoch reaches even persistent workers.

    Shuffling is a permutation from ``(seed, epoch)``; with ``world_size > 1``
    each rank takes every ``world_size``-th position (padded by wrapping so all
    ranks see the same count). Use it with Lightning's ``use_distributed_sampler=False``.
    """

    def __init__(self, num_items: int, shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        self.num_items = int(num_items)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.rank = int(rank)
        self.world_size = max(1, int(world_size))
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return math.ceil(self.num_items / self.world_size)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.num_items)
        else:
            order = np.arange(self.num_items)
        total = len(self) * self.world_size
        if total > self.num_items and self.num_items:
            order = np.concatenate([order, order[: total - self.num_items]])
        for i in order[self.rank : total : self.world_size]:
            yield (self.epoch, int(i))


class _GuardedIterator:
    """Wraps a DataLoader iterator; worker deaths become :class:`WorkerDiedError`."""

    def __init__(self, inner: Iterator[Any], num_workers: int) -> None:
        self._inner = inner
        self._num_workers = num_workers

    def __iter__(self) -> _GuardedIterator:
        return self

    def __len__(self) -> int:
        return len(self._inner)  # type: ignore[arg-type]

    def __next__(self) -> Any:
        try:
            return next(self._inner)
        except (RuntimeError, OSError) as exc:
            msg = str(exc)
            if not any(sign in msg for sign in _DEATH_SIGNS):
                raise
            raise WorkerDiedError(
                f"A data-loader worker died ({msg.strip().splitlines()[0]}).",
                why=(
                    "the OS killed it: usually /dev/shm is too small for the batches in flight "
                    "(containers default to 64 MB) or host memory ran out."
                ),
                fix=(
                    "Enlarge /dev/shm (docker: --shm-size=8g / --ipc=host), lower data.batch_size or "
                    "data.num_workers, or run with --data.num_workers 0."
                ),
            ) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class GuardedDataLoader(DataLoader):
    """A :class:`DataLoader` whose iterator re-raises worker deaths as :class:`WorkerDiedError`."""

    def __iter__(self) -> _GuardedIterator:  # type: ignore[override]
        return _GuardedIterator(super().__iter__(), self.num_workers)

    def set_epoch(self, epoch: int) -> None:
        """Forward the epoch to the sampler (and the dataset, for 0-worker integer use)."""
        sampler = self.sampler
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)  # type: ignore[attr-defined]


def _loader_kwargs(num_workers: int, prefetch_factor: int, persistent_workers: bool, pin_memory: bool | None) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "num_workers": num_workers,
        "pin_memory": torch.cuda.is_available() if pin_memory is None else (pin_memory and torch.cuda.is_available()),
    }
    if num_workers > 0:
        kw.update(
            worker_init_fn=worker_init_fn,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
        )
    return kw


def build_train_loader(
    dataset: Dataset,
    batch_size: int,
    fields: tuple[str, ...] = (),
    *,
    num_workers: int | None = None,
    prefetch_factor: int = 2,
    persistent_workers: bool = False,
    pin_memory: bool | None = None,
    seed: int = 0,
    shuffle: bool = True,
    drop_last: bool = False,
    rank: int = 0,
    world_size: int = 1,
) -> GuardedDataLoader:
    """Training loader over a :class:`~lucidyolo.data.datasets.TrainDataset`.

    Args:
        dataset: training dataset (its ``img_size`` and ``device_hsv`` size the shm budget).
        batch_size: per-rank batch size.
        fields: the task's instance fields beyond boxes/labels/difficult (fix the packed tensor set).
        num_workers: ``None`` = automatic (see :func:`resolve_num_workers`).
        prefetch_factor: batches queued per worker (DataLoader default 2).
        persistent_workers: keep workers between epochs (default off).
        pin_memory: ``None`` = only when CUDA is available; never without CUDA.
        seed: run seed (shuffle order; per-worker seeds).
        rank, world_size: DDP sharding done by our sampler.
    """
    img_size = int(getattr(dataset, "img_size", 640))
    float_images = bool(getattr(dataset, "device_hsv", False))
    workers = resolve_num_workers(num_workers, batch_size, img_size, prefetch_factor, float_images)
    sampler = EpochSampler(len(dataset), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size)  # type: ignore[arg-type]
    generator = torch.Generator()
    generator.manual_seed(seed)
    return GuardedDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=drop_last,
        collate_fn=partial(collate_packed, fields=field_specs(fields)),
        generator=generator,
        **_loader_kwargs(workers, prefetch_factor, persistent_workers, pin_memory),
    )


def build_val_loader(
    dataset: Dataset,
    batch_size: int,
    fields: tuple[str, ...] = (),
    *,
    inherited_workers: int = 0,
    val_num_workers: int | None = None,
    prefetch_factor: int = 2,
    train_pool_bytes: int = 0,
    pin_memory: bool | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> GuardedDataLoader:
    """Validation loader (ordered, letterbox only).

    Args:
        inherited_workers: the training worker count the validation pool would inherit.
        val_num_workers: ``data.val_num_workers`` override.
        train_pool_bytes: shm the resident training queue holds
            (``workers x prefetch x batch_bytes``).
    """
    img_size = int(getattr(dataset, "img_size", 640))
    workers = resolve_val_num_workers(inherited_workers, val_num_workers, batch_size, img_size, prefetch_factor, train_pool_bytes)
    sampler = EpochSampler(len(dataset), shuffle=False, rank=rank, world_size=world_size)  # type: ignore[arg-type]
    return GuardedDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=partial(collate_packed, fields=field_specs(fields)),
        **_loader_kwargs(workers, prefetch_factor, False, pin_memory),
    )


def packed_batch_tensor_count(batch: PackedBatch) -> int:
    """Shared-memory segments one batch costs crossing the worker boundary (its tensor count)."""
    return batch.num_tensors
