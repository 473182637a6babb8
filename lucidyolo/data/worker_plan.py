"""How many loader workers fit: cores, batch size and the /dev/shm budget, training and validation together.

Every batch a worker hands over lives in /dev/shm until the training step is
done with it: per loader, ``workers x prefetch_factor`` batches queued or being
built, plus the one the step holds (:func:`batches_in_flight`). When they do
not fit, a worker's allocation fails ("No space left on device"). The training
pool can still be resident while validation runs (an epoch cut short by
``limit_train_batches``, persistent workers), so both loaders are budgeted at
once, each at the largest batch it can emit, for every training process on the
host (they share one /dev/shm).

Automatic count: the largest ``w <= wanted`` whose in-flight bytes (training
and validation at ``w`` workers each) fit ``SHM_FRACTION`` of the free space; 0
(load in the main process) when even one worker does not fit. ``wanted``
(:func:`wanted_workers`) counts the cores the training step itself needs and
the start-up every pool pays each epoch. A count the user names is refused when
its in-flight bytes exceed *all* the free space: such a run cannot finish.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lucidyolo.data.shm import SHM_FRACTION, local_world_size, shm_free_bytes, shm_page_size
from lucidyolo.errors import UserError

MB = 1e6

CPU_STEP_CORES_PER_WORKER = 4
"""A CPU training step uses every core; one loader worker per this many cores, and none below 8 cores."""

MIN_BATCHES_PER_WORKER = 4
"""A pool started each epoch needs this many batches per worker to pay for its start-up (train and validation)."""


def wanted_workers(cores: int, batch_size: int, *, cpu_step: bool, batches_per_epoch: int | None = None) -> int:
    """The automatic worker count before the /dev/shm budget (docs/DECISIONS.md, "Loader workers").

    - An accelerator step needs one core to drive the device: ``cores - 1`` workers.
    - A CPU step runs torch's kernels on every core, so a worker slows the step by
      the core it takes; it pays only on a machine with cores to spare:
      ``cores // 4`` from 8 cores up, 0 below (on 2 cores 0 workers trained the
      shapes benchmark 22 % faster than 2: 43 s against 55 s for 6 epochs).
    - Workers start again every epoch (train and validation pools): with fewer
      than ``MIN_BATCHES_PER_WORKER`` batches per worker an epoch is too short to
      win back that start-up.

    Args:
        cores: cores of this process (its share when several ranks share a host).
        batch_size: per-process batch size; never more workers than images in a batch.
        cpu_step: the training step runs on the CPU.
        batches_per_epoch: training batches per epoch (``None``: not limited by it).
    """
    if cpu_step:
        wanted = cores // CPU_STEP_CORES_PER_WORKER if cores >= 2 * CPU_STEP_CORES_PER_WORKER else 0
    else:
        wanted = max(1, cores - 1)
    if batches_per_epoch is not None:
        wanted = min(wanted, batches_per_epoch // MIN_BATCHES_PER_WORKER)
    return max(0, min(batch_size, wanted))


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def batches_in_flight(workers: int, prefetch_factor: int) -> int:
    """Batches of one loader in /dev/shm at once: ``workers x prefetch`` outstanding plus the one being trained on.

    Lightning's fetcher prefetches nothing more when the loader has a length
    (ours always has), so the step's batch is the only extra one. 0 workers
    load in the main process and use no shared memory.
    """
    return workers * max(1, prefetch_factor) + 1 if workers > 0 else 0


def largest_batch_nbytes(
    source: object,
    fields: tuple[str, ...],
    batch_size: int,
    img_size: int,
    *,
    train: bool,
    mosaic: bool = True,
    mixup: bool = False,
    copy_paste: bool = False,
    float_images: bool = False,
) -> int:
    """Shared-memory bytes of the largest packed batch a loader over ``source`` can emit.

    Images are always ``S x S``; the instance count per image is bounded by the
    densest source image times what training can add: mosaic joins 4 images,
    mixup blends a second (mosaic) sample in, copy-paste at most doubles the
    instances. Every tensor is rounded up to whole pages, as shm allocates them.

    Args:
        source: an :class:`~lucidyolo.data.source.ImageSource`.
        fields: the task's fields (``TaskSpec.fields``): they fix the packed tensors.
        batch_size, img_size: B and S.
        train: apply the training multipliers (validation letterboxes one image).
        mosaic, mixup, copy_paste: whether those steps can fire (probability > 0).
        float_images: device-HSV transport (float32 images + gains).
    """
    from lucidyolo.data.augment.copy_paste import cutout_field
    from lucidyolo.structures.fields import field_specs
    from lucidyolo.structures.packed import packed_nbytes

    factor = 1
    if train:
        factor *= 4 if mosaic else 1
        factor *= 2 if mixup else 1
        # copy-paste doubles the instances it can cut out
        factor *= 2 if copy_paste and cutout_field(field_specs(fields)) is not None else 1
    counts = source.instances_per_image()  # type: ignore[attr-defined]
    points, rings = source.ragged_sizes_per_image()  # type: ignore[attr-defined]
    most = lambda a: int(a.max()) if len(a) else 0  # noqa: E731
    return packed_nbytes(
        fields, batch_size, img_size, most(counts) * factor, float_images=float_images,
        meta=source.meta(),  # type: ignore[attr-defined]
        ring_points=most(points) * factor,
        rings=most(rings) * factor, page=shm_page_size(),
    )


@dataclass(frozen=True)
class WorkerPlan:
    """Worker counts of the training and validation loaders and the numbers they were chosen from.

    Attributes:
        train, val: worker counts.
        wanted: the automatic count before the /dev/shm budget (cores and batch size).
        auto: the training count was automatic.
        free_bytes: free /dev/shm when planned (``None``: no /dev/shm, no budget).
        ranks: training processes on this host sharing /dev/shm.
        train_batch_bytes, val_batch_bytes: the largest batch of each loader.
        prefetch_factor: batches queued per worker.
        val_inherited: the validation count follows the training count.
    """

    train: int
    val: int
    wanted: int
    auto: bool
    free_bytes: int | None
    ranks: int
    train_batch_bytes: int
    val_batch_bytes: int
    prefetch_factor: int
    val_inherited: bool = True
    cpu_step: bool = False

    def in_flight_bytes(self, train: int | None = None, val: int | None = None) -> int:
        """Shared-memory bytes one process keeps in flight (default: at the planned counts)."""
        t = self.train if train is None else train
        v = self.val if val is None else val
        p = self.prefetch_factor
        return batches_in_flight(t, p) * self.train_batch_bytes + batches_in_flight(v, p) * self.val_batch_bytes

    @property
    def budget_bytes(self) -> float | None:
        """What the automatic count may use per process: ``SHM_FRACTION`` of the free space over the ranks."""
        return None if self.free_bytes is None else self.free_bytes * SHM_FRACTION / self.ranks

    def describe(self) -> str:
        """One line naming the counts and the numbers behind them."""
        counts = f"{self.train} training, {self.val} validation"
        if self.auto and self.wanted == 0 and self.train == 0:
            why = ("the CPU training step uses every core, and a worker would take one from it"
                   if self.cpu_step else "an epoch has too few batches to pay for starting workers")
            return f"loader workers: {counts} (the main process loads: {why})"
        if self.free_bytes is None:
            return f"loader workers: {counts} (no /dev/shm on this host: not budgeted)"
        shm = f"/dev/shm {self.free_bytes / MB:.1f} MB free" + (f" for {self.ranks} processes" if self.ranks > 1 else "")
        batch = f"{self.train_batch_bytes / MB:.1f} MB per batch"
        if self.auto and self.train < self.wanted:
            more = self.train + 1
            one = self.in_flight_bytes(more, more if self.val_inherited else self.val)
            return (
                f"loader workers: {counts} instead of {self.wanted}: {shm}, {batch}; "
                f"{self.train + 1} would keep {one / MB:.1f} MB in flight, over {SHM_FRACTION:.0%} of the free space "
                "(enlarge /dev/shm, e.g. docker --shm-size=8g, for more)"
            )
        return f"loader workers: {counts} ({shm}, {batch}, {self.in_flight_bytes() / MB:.1f} MB in flight)"


def plan_workers(
    requested: int | None,
    val_requested: int | None,
    *,
    batch_size: int,
    train_batch_bytes: int,
    val_batch_bytes: int,
    prefetch_factor: int = 2,
    cores: int | None = None,
    free_bytes: int | None | str = "probe",
    ranks: int | None = None,
    cpu_step: bool = False,
    batches_per_epoch: int | None = None,
) -> WorkerPlan:
    """Choose (or check) the training and validation worker counts.

    Args:
        requested: ``data.num_workers`` (``None`` = automatic).
        val_requested: ``data.val_num_workers`` (``None`` = inherit the training count,
            reduced to what the budget leaves).
        batch_size: per-process batch size (the automatic count never exceeds it).
        train_batch_bytes, val_batch_bytes: :func:`largest_batch_nbytes` of each loader.
        prefetch_factor: batches queued per worker.
        cores: override the detected core count (tests).
        free_bytes: override the probed free /dev/shm (``None`` = no /dev/shm).
        ranks: training processes on this host (default ``LOCAL_WORLD_SIZE``).
        cpu_step, batches_per_epoch: see :func:`wanted_workers`.

    Raises:
        UserError: a named count is negative, or its batches cannot fit the free /dev/shm.
    """
    for key, value in (("data.num_workers", requested), ("data.val_num_workers", val_requested)):
        if value is not None and value < 0:
            raise UserError(f"{key} = {value} is negative.", fix="Use 0 (main process) or a positive count.")
    ranks = local_world_size() if ranks is None else max(1, int(ranks))
    cores = available_cores() if cores is None else int(cores)
    free = shm_free_bytes() if free_bytes == "probe" else free_bytes
    wanted = wanted_workers(max(1, cores // ranks), batch_size, cpu_step=cpu_step, batches_per_epoch=batches_per_epoch)

    def plan(train: int, val: int) -> WorkerPlan:
        return WorkerPlan(
            train=train, val=val, wanted=wanted, auto=requested is None, free_bytes=free, ranks=ranks,  # type: ignore[arg-type]
            train_batch_bytes=train_batch_bytes, val_batch_bytes=val_batch_bytes, prefetch_factor=prefetch_factor,
            val_inherited=val_requested is None, cpu_step=cpu_step,
        )

    if free is None:  # nothing to budget against
        train = wanted if requested is None else requested
        return plan(train, train if val_requested is None else val_requested)
    budget = plan(0, 0).budget_bytes
    assert budget is not None
    everything = free / ranks  # type: ignore[operator]

    if requested is None:
        train = next(
            (w for w in range(wanted, -1, -1)
             if plan(w, w if val_requested is None else val_requested).in_flight_bytes() <= budget),
            0,
        )
    else:
        train = requested
    val = train if val_requested is None else val_requested
    if val_requested is None and requested is not None:
        # the inherited validation count gets what the (named) training queue leaves of the budget
        val = next((v for v in range(train, -1, -1) if plan(train, v).in_flight_bytes() <= max(budget, plan(train, 0).in_flight_bytes())), 0)

    chosen = plan(train, val)
    for key, named, counts in (
        ("data.num_workers", requested, lambda w: (w, val if val_requested is not None else 0)),
        ("data.val_num_workers", val_requested, lambda w: (train if requested is not None else 0, w)),
    ):
        if named is None or chosen.in_flight_bytes(*counts(named)) <= everything:
            continue
        fits = next((w for w in range(named, -1, -1) if chosen.in_flight_bytes(*counts(w)) <= everything), 0)
        raise UserError(
            f"{key} = {named} does not fit /dev/shm: {chosen.in_flight_bytes(*counts(named)) / MB:.1f} MB of batches "
            f"would be in flight ({named} workers x prefetch {prefetch_factor} + 1 = "
            f"{batches_in_flight(named, prefetch_factor)} batches of up to {max(train_batch_bytes, val_batch_bytes) / MB:.1f} MB), "
            f"but /dev/shm has {free / MB:.1f} MB free"  # type: ignore[operator]
            + (f" for {ranks} processes." if ranks > 1 else "."),
            why="loader workers hand every batch over through /dev/shm; when it is full a worker cannot "
            "allocate the next batch ('No space left on device') and the run stops.",
            fix=f"Use --{key} {fits} (the most that fits) or leave data.num_workers at auto, "
            "lower data.batch_size or data.img_size, or enlarge /dev/shm (docker run --shm-size=8g, or --ipc=host).",
        )
    return chosen


def plan_eval_workers(
    source: object, fields: tuple[str, ...], batch_size: int, img_size: int, *, wanted: int = 2,
    prefetch_factor: int = 2, free_bytes: int | None | str = "probe",
) -> int:
    """Workers of a one-process evaluation or prediction loader, budgeted as ``lucid fit`` budgets its own.

    At most ``wanted`` (and ``batch_size``); the most whose batches in flight fit
    ``SHM_FRACTION`` of the free /dev/shm (0: the main process loads). Evaluation at
    640 px x 32 keeps 39 MB per batch: two workers (5 batches) would not fit Docker's
    64 MiB default, and a worker would die with "No space left on device".

    Args:
        source, fields, batch_size, img_size: as :func:`largest_batch_nbytes` (validation: letterbox only).
        free_bytes: override the probed free /dev/shm (``None`` = no /dev/shm, no budget).
    """
    wanted = max(0, min(int(wanted), int(batch_size)))
    free = shm_free_bytes() if free_bytes == "probe" else free_bytes
    if free is None:
        return wanted
    batch = largest_batch_nbytes(source, fields, batch_size, img_size, train=False)
    budget = free * SHM_FRACTION  # type: ignore[operator]
    return next((w for w in range(wanted, 0, -1) if batches_in_flight(w, prefetch_factor) * batch <= budget), 0)
