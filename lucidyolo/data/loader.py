"""DataLoader factory with the guards a real training run needs.

Three resources run out independently (data spec, "Batch transport"):
CPU threads (:func:`worker_init_fn` pins each worker to one torch thread),
/dev/shm bytes (:mod:`lucidyolo.data.worker_plan` budgets the worker counts)
and shm segments (:class:`PackedBatch` keeps the tensor count per batch
constant). A failing worker never leaves the main process waiting: the batch's
shared memory is allocated inside the fetch (:func:`collate_for_transport`), a
worker whose queue cannot send exits, and every worker death or exception
surfaces as a :class:`~lucidyolo.errors.UserError` with advice
(:func:`worker_error`), after which the workers are stopped and their leftover
segments removed (:mod:`lucidyolo.data.shm_segments`).
"""

from __future__ import annotations

import math
import multiprocessing.queues
import os
import random
import signal
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info
from torch.utils.data import _utils as torch_data_utils

from lucidyolo.data import shm_segments
from lucidyolo.data.shm import shm_free_bytes
from lucidyolo.data.worker_plan import largest_batch_nbytes, plan_workers
from lucidyolo.errors import UserError
from lucidyolo.structures.fields import field_specs
from lucidyolo.structures.packed import PackedBatch, collate_packed

_SHM_SIGNS = (
    "unable to allocate shared memory",
    "No space left on device",
    "Cannot allocate memory",
    "unable to mmap",
    "unable to open shared memory",
    "Too many open files",
)
_DEATH_SIGNS = ("killed by signal", "exited unexpectedly")
_DEATH_SOURCE = "DataLoader worker (pid"  # torch's wording for both deaths
_RAISED_IN_WORKER = "in DataLoader worker process"
RESUME_HINT = "The last finished epoch is in the run's checkpoints/last.ckpt; continue with `lucid fit TASK --resume RUN_DIR`."


class WorkerDiedError(UserError):
    """A loader worker was killed by the OS or could not allocate shared memory."""


class WorkerFailedError(UserError):
    """A loader worker raised an exception while building a batch."""


def _exit_on_feeder_error(exc: BaseException, obj: Any) -> None:
    # Runs in a worker's queue feeder thread when a finished batch cannot be sent (e.g. no file
    # descriptor left to pass its segments). The stdlib default prints and drops the batch, and the
    # main process then waits for it forever; exiting turns that into a dead worker, which the main
    # process notices at once (SIGCHLD) and reports.
    traceback.print_exception(exc)
    os._exit(1)


def worker_init_fn(worker_id: int) -> None:
    """Run in every worker at start: one torch thread, per-worker seeds, signal and queue guards.

    torch's per-worker seed (``base_seed + worker_id``; the base is drawn from
    the loader's generator, re-seeded from ``(seed, epoch)`` each epoch) seeds
    the global ``random``, numpy and torch RNGs for any third-party code; our
    own augmentation draws come from per-sample generators.

    The fit runner's SIGINT/SIGTERM handlers are inherited through fork; a
    worker takes the defaults back (Ctrl-C: torch's worker loop exits quietly
    on KeyboardInterrupt; SIGTERM ends it) and leaves stopping the run to the
    main process.
    """
    torch.set_num_threads(1)
    info = get_worker_info()
    seed = info.seed if info is not None else worker_id
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    multiprocessing.queues.Queue._on_queue_feeder_error = staticmethod(_exit_on_feeder_error)  # type: ignore[method-assign]


def collate_for_transport(samples: Any, fields: Any = ()) -> PackedBatch:
    """Pack a batch; inside a worker, also move it into shared memory.

    Allocating the segments here, in the worker's main thread, makes a full
    /dev/shm raise inside the fetch, so the exception reaches the main process.
    Left to the queue's feeder thread (torch's default for tensors not yet
    shared; the same copy, so no extra cost), the failure is only printed
    there, the batch is lost and the main process waits for it forever.
    """
    batch = collate_packed(samples, fields)
    if get_worker_info() is not None:
        batch.share_memory_()
    return batch


def _original_error(message: str) -> tuple[str, str]:
    """The worker's own exception line and innermost frame from torch's re-raised message."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    frames = [ln for ln in lines if ln.startswith('File "')]
    return (lines[-1] if lines else ""), (frames[-1] if frames else "")


def worker_error(exc: BaseException, in_loader: bool = True) -> UserError | None:
    """The user-facing error for a loader worker's death or exception, or ``None`` if ``exc`` is not one.

    Args:
        exc: the exception.
        in_loader: ``exc`` came out of the loader itself, so an out-of-shared-memory error of the main
            process (opening the workers' queues) is the loader's too. Elsewhere only torch's worker
            messages count: a training step's "Cannot allocate memory" is not about /dev/shm.
    """
    if isinstance(exc, UserError):
        return None
    message = str(exc)
    worker_raised = _RAISED_IN_WORKER in message
    died = _DEATH_SOURCE in message and any(s in message for s in _DEATH_SIGNS)
    short_of_shm = in_loader and any(s in message for s in _SHM_SIGNS)
    if not (worker_raised or (isinstance(exc, RuntimeError | OSError) and (died or short_of_shm))):
        return None
    first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
    free = shm_free_bytes()
    free_now = "" if free is None else f" ({free / 1e6:.1f} MB free now)"
    shm_fix = (
        "Lower data.num_workers (or leave it at auto, which budgets /dev/shm), lower data.batch_size or "
        "data.img_size, or enlarge /dev/shm (docker run --shm-size=8g, or --ipc=host); --data.num_workers 0 "
        f"loads in the main process without /dev/shm. {RESUME_HINT}"
    )
    if worker_raised:
        original, frame = _original_error(message)
        if any(sign in original for sign in _SHM_SIGNS):
            return WorkerDiedError(
                f"A data-loader worker could not allocate shared memory for a batch: {original}",
                why=f"/dev/shm{free_now} is too small for the batches in flight (workers x prefetch_factor; "
                "containers default to 64 MB).",
                fix=shm_fix,
            )
        return WorkerFailedError(
            f"A data-loader worker failed: {original}",
            why=f"the loader stops at the first sample it cannot build ({frame or 'no frame'}).",
            fix="If it names a data file, repair or remove it (`lucid data check --data-root ...`); rerun with "
            f"--data.num_workers 0 to see the full traceback in the main process. {RESUME_HINT}",
        )
    if died:
        return WorkerDiedError(
            f"A data-loader worker died ({first}).",
            why="the OS killed it: usually host memory ran out, or /dev/shm is too small for the batches "
            f"in flight{free_now}.",
            fix=shm_fix,
        )
    return WorkerDiedError(
        f"The data loader could not get shared memory ({first}).",
        why=f"/dev/shm{free_now} is too small for the loader's queues and the batches in flight.",
        fix=shm_fix,
    )


class EpochSampler(Sampler[tuple[int, int, int]]):
    """Yields ``(epoch, position, index)``: the epoch reaches even persistent workers.

    Shuffling is a permutation from ``(seed, epoch)``; ``position`` is the
    sample's place in the epoch's (padded) order, the same on every rank, and
    seeds that sample's augmentation. With ``world_size > 1`` each rank takes
    every ``world_size``-th position (padded by wrapping so all ranks see the
    same count). Use it with Lightning's ``use_distributed_sampler=False``.

    The order, written down (``W`` processes, ``b`` images per process): process
    ``r`` takes positions ``r, r + W, r + 2W, ...`` and its ``k``-th batch is
    positions ``k b W + r + W j`` for ``j < b``, so the ``k``-th global batch (every
    process's ``k``-th) is positions ``k b W .. (k + 1) b W - 1``: the ``k``-th batch of
    one process at batch ``b W``, the same images augmented alike. Only when the
    split is not a multiple of ``W`` does the wrap-around padding repeat the first
    positions' images at the end (tests/distributed/test_global_batch_order.py).
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

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.num_items)
        else:
            order = np.arange(self.num_items)
        total = len(self) * self.world_size
        if total > self.num_items and self.num_items:
            order = np.concatenate([order, order[: total - self.num_items]])
        for position in range(self.rank, total, self.world_size):
            yield (self.epoch, position, int(order[position]))


STOP_GRACE_S = 0.5
"""How long a stopping loader waits for each busy worker before terminating it."""

_live: weakref.WeakSet[_GuardedIterator] = weakref.WeakSet()


@contextmanager
def _status_interval(seconds: float) -> Iterator[None]:
    # torch's shutdown joins each worker for MP_STATUS_CHECK_INTERVAL (5 s), one after the other, before
    # it terminates the ones still running: a worker stuck in a batch would hold a stopping run that long
    saved = torch_data_utils.MP_STATUS_CHECK_INTERVAL
    torch_data_utils.MP_STATUS_CHECK_INTERVAL = seconds
    try:
        yield
    finally:
        torch_data_utils.MP_STATUS_CHECK_INTERVAL = saved


def stop_all_loaders() -> None:
    """Stop every running loader's workers now (a run is ending) and remove the segments they left."""
    for it in list(_live):
        it.shutdown()


class _GuardedIterator:
    """A DataLoader iterator created at the first ``next`` and guarded against worker failures.

    Lazy on purpose: Lightning calls ``iter()`` before it sets the sampler's
    epoch (at setup, and on resume for the first epoch), and a worker pool
    dispatches its first batches the moment it starts, so an eager iterator
    trained a resumed run's first epoch on epoch 0's samples.
    """

    def __init__(self, loader: GuardedDataLoader, make: Callable[[], Iterator[Any]]) -> None:
        self._loader = loader
        self._make = make
        self._inner: Iterator[Any] | None = None

    def __iter__(self) -> _GuardedIterator:
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        try:
            if self._inner is None:
                self._inner = self._make()
                _live.add(self)
                shm_segments.track(w.pid for w in getattr(self._inner, "_workers", ()) if w.pid is not None)
            return next(self._inner)
        except StopIteration:
            raise
        except Exception as exc:
            err = worker_error(exc)
            if err is None:
                raise
            self.shutdown()
            raise err from exc

    def shutdown(self) -> None:
        """Stop this iterator's workers now and remove the segments they left."""
        inner = self._inner
        if inner is None:
            return
        _live.discard(self)
        pids = [w.pid for w in getattr(inner, "_workers", ()) if w.pid is not None]
        stop = getattr(inner, "_shutdown_workers", None)
        if stop is not None:
            with _status_interval(STOP_GRACE_S):
                stop()
        shm_segments.remove_leftovers(pids)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or self.__dict__.get("_inner") is None:
            raise AttributeError(name)
        return getattr(self.__dict__["_inner"], name)


def _generator_seed(seed: int, epoch: int) -> int:
    return int(np.random.SeedSequence([seed % 2**63, epoch]).generate_state(1)[0])


class GuardedDataLoader(DataLoader):
    """A :class:`DataLoader` with a lazy, guarded iterator (see :class:`_GuardedIterator`)."""

    def __iter__(self) -> _GuardedIterator:  # type: ignore[override]
        return _GuardedIterator(self, self._start_epoch)

    def _start_epoch(self) -> Iterator[Any]:
        # The base seed of the workers' global RNGs is drawn from the generator when the iterator starts;
        # re-seeding it from (seed, epoch) makes it independent of how many epochs this process has run.
        sampler = self.sampler
        if self.generator is not None and isinstance(sampler, EpochSampler):
            self.generator.manual_seed(_generator_seed(sampler.seed, sampler.epoch))
        return super().__iter__()

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
        dataset: training dataset (its source, ``img_size``, strengths and ``device_hsv`` size the shm budget).
        batch_size: per-rank batch size.
        fields: the task's instance fields beyond boxes/labels/difficult (fix the packed tensor set).
        num_workers: ``None`` = automatic for this loader alone (the fit runner plans
            training and validation together and passes the count).
        prefetch_factor: batches queued per worker (DataLoader default 2).
        persistent_workers: keep workers between epochs (default off).
        pin_memory: ``None`` = only when CUDA is available; never without CUDA.
        seed: run seed (shuffle order; per-worker seeds).
        rank, world_size: DDP sharding done by our sampler.
    """
    if num_workers is None:
        strengths = getattr(dataset, "strengths", None)
        batch_bytes = largest_batch_nbytes(
            dataset.source, tuple(fields), batch_size, int(dataset.img_size), train=True,  # type: ignore[attr-defined]
            mosaic=strengths is None or strengths.mosaic > 0, mixup=strengths is not None and strengths.mixup > 0,
            copy_paste=strengths is not None and strengths.copy_paste > 0,
            float_images=bool(getattr(dataset, "device_hsv", False)),
        )
        num_workers = plan_workers(
            None, 0, batch_size=batch_size, train_batch_bytes=batch_bytes, val_batch_bytes=0, prefetch_factor=prefetch_factor
        ).train
    sampler = EpochSampler(len(dataset), shuffle=shuffle, seed=seed, rank=rank, world_size=world_size)  # type: ignore[arg-type]
    generator = torch.Generator()
    generator.manual_seed(seed)
    return GuardedDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=drop_last,
        collate_fn=partial(collate_for_transport, fields=field_specs(fields)),
        generator=generator,
        **_loader_kwargs(num_workers, prefetch_factor, persistent_workers, pin_memory),
    )


def build_val_loader(
    dataset: Dataset,
    batch_size: int,
    fields: tuple[str, ...] = (),
    *,
    val_num_workers: int = 0,
    prefetch_factor: int = 2,
    pin_memory: bool | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> GuardedDataLoader:
    """Validation loader (ordered, letterbox only).

    Args:
        val_num_workers: worker count (the fit runner's plan, or the caller's choice).
    """
    sampler = EpochSampler(len(dataset), shuffle=False, rank=rank, world_size=world_size)  # type: ignore[arg-type]
    return GuardedDataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=partial(collate_for_transport, fields=field_specs(fields)),
        **_loader_kwargs(int(val_num_workers), prefetch_factor, False, pin_memory),
    )
