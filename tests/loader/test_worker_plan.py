"""The worker budget: training and validation batches in flight against the free /dev/shm."""

from __future__ import annotations

import pytest

from lucidyolo.data.shm import shm_page_size
from lucidyolo.data.worker_plan import batches_in_flight, largest_batch_nbytes, plan_workers
from lucidyolo.errors import UserError
from lucidyolo.structures.packed import packed_nbytes
from tests.task_fields import fields_of

MIB, GIB = 1 << 20, 1 << 30
BATCH_640_16 = packed_nbytes(fields_of("det"), 16, 640, 50, page=4096)  # ~19.7 MB: the batch


def _plan(free, cores=16, ranks=1, requested=None, val=None, batch=BATCH_640_16, val_batch=BATCH_640_16):
    return plan_workers(
        requested, val, batch_size=16, train_batch_bytes=batch, val_batch_bytes=val_batch, prefetch_factor=2,
        cores=cores, free_bytes=free, ranks=ranks,
    )


def _in_flight(workers: int, batch: int = BATCH_640_16) -> int:
    # written out independently of the module: queue (workers x prefetch) + the step's batch, per loader
    return 2 * ((workers * 2 + 1) * batch if workers else 0)


def test_a_64_mib_shm_gets_no_workers_and_the_line_names_the_numbers():
    assert 19.6e6 < BATCH_640_16 < 19.8e6
    plan = _plan(64 * MIB)
    assert (plan.train, plan.val) == (0, 0)
    assert _in_flight(1) > 0.5 * 64 * MIB  # even one worker per loader would not fit half the space
    line = plan.describe()
    assert "0 training, 0 validation instead of 15" in line
    assert "67.1 MB free" in line and "19.7 MB per batch" in line and "--shm-size" in line


# An accelerator step keeps one core for the main process: 16 cores -> at most 15 workers, 2 -> 1.
@pytest.mark.parametrize(("free", "cores", "expected"), [(GIB, 16, 6), (GIB, 2, 1), (16 * GIB, 16, 15), (16 * GIB, 2, 1)])
def test_the_count_is_the_largest_whose_batches_fit_half_the_free_space(free, cores, expected):
    plan = _plan(free, cores=cores)
    assert (plan.train, plan.val) == (expected, expected)
    assert plan.in_flight_bytes() == _in_flight(expected) <= 0.5 * free
    if expected < min(cores - 1, 16):
        assert _in_flight(expected + 1) > 0.5 * free


def test_ranks_on_one_host_split_cores_and_shm():
    alone = _plan(GIB, cores=16, ranks=1)
    shared = _plan(GIB, cores=16, ranks=2)
    assert (alone.train, shared.train) == (6, 2)
    assert 2 * _in_flight(shared.train) <= 0.5 * GIB < 2 * _in_flight(shared.train + 1)
    assert "for 2 processes" in shared.describe()


def test_no_shm_means_no_budget_and_workers_stay():
    plan = _plan(None, cores=4)
    assert (plan.train, plan.val) == (3, 3) and "not budgeted" in plan.describe()
    assert batches_in_flight(0, 2) == 0 and batches_in_flight(3, 2) == 7


def test_a_named_count_that_cannot_fit_is_refused_with_the_numbers_and_the_count_that_fits():
    with pytest.raises(UserError) as exc:
        _plan(64 * MIB, requested=2)
    err = exc.value
    text = str(err)
    assert "data.num_workers = 2 does not fit /dev/shm" in err.what
    assert "98.5 MB" in err.what and "5 batches of up to 19.7 MB" in err.what and "67.1 MB free" in err.what
    # one worker alone (3 batches, 59.1 MB) fits the 67.1 MB; validation then loads in the main process
    assert "--data.num_workers 1 (the most that fits)" in err.fix and "--shm-size" in err.fix and "No space left on device" in text
    # the same count is honoured where it fits all the free space (validation then gets what is left)
    plan = _plan(200 * MIB, requested=2)
    assert plan.train == 2 and plan.val == 0 and plan.in_flight_bytes() <= 200 * MIB
    with pytest.raises(UserError, match="data.num_workers = 1 does not fit"):
        _plan(50 * MIB, requested=1)
    assert _plan(None, requested=12).train == 12
    with pytest.raises(UserError, match="negative"):
        _plan(GIB, requested=-1)


def test_a_named_validation_count_is_checked_and_the_training_count_makes_room():
    with pytest.raises(UserError, match="data.val_num_workers = 8 does not fit"):
        _plan(256 * MIB, val=8)
    plan = _plan(GIB, val=4)
    assert plan.val == 4 and plan.in_flight_bytes() <= 0.5 * GIB
    assert plan.train == 8  # (2 x 8 + 1) + 9 = 26 batches of 19.7 MB fit 512 MiB, 28 do not


def test_the_largest_batch_counts_the_densest_image_and_what_training_adds(tmp_path):
    from tests.augment.scenes import rect_source

    source = rect_source(tmp_path, "seg", n=3)
    most = int(source.instances_per_image().max())
    points, rings = (int(a.max()) for a in source.ragged_sizes_per_image())
    val = largest_batch_nbytes(source, fields_of("seg"), 4, 64, train=False)
    assert val == packed_nbytes(fields_of("seg"), 4, 64, most, ring_points=points, rings=rings, page=shm_page_size())
    train = largest_batch_nbytes(source, fields_of("seg"), 4, 64, train=True, mixup=True, copy_paste=True)
    assert train == packed_nbytes(fields_of("seg"), 4, 64, 16 * most, ring_points=16 * points, rings=16 * rings, page=shm_page_size())
    assert largest_batch_nbytes(source, fields_of("seg"), 4, 64, train=True, float_images=True) > 4 * 3 * 64 * 64 * 4


@pytest.mark.parametrize(("cores", "expected"), [(1, 0), (2, 0), (4, 0), (7, 0), (8, 2), (16, 4), (64, 16)])
def test_a_cpu_step_leaves_its_cores_to_the_step(cores, expected):
    # 2 cores: the shapes benchmark trained 6 epochs in 43 s with 0 workers against 55 s with 2.
    plan = plan_workers(None, None, batch_size=16, train_batch_bytes=BATCH_640_16, val_batch_bytes=BATCH_640_16,
                        cores=cores, free_bytes=None, cpu_step=True)
    assert plan.train == plan.val == expected
    if expected == 0:
        assert "the CPU training step uses every core" in plan.describe()


def test_short_epochs_get_fewer_workers():
    # 8 batches an epoch: each of at most 2 workers gets its 4 batches; 3 batches: not worth starting a pool.
    plan = plan_workers(None, None, batch_size=8, train_batch_bytes=BATCH_640_16, val_batch_bytes=BATCH_640_16,
                        cores=16, free_bytes=None, batches_per_epoch=8)
    assert plan.train == 2
    assert plan_workers(None, None, batch_size=8, train_batch_bytes=1, val_batch_bytes=1, cores=16, free_bytes=None,
                        batches_per_epoch=3).train == 0
    # a named count is the user's: not reduced
    assert plan_workers(3, None, batch_size=8, train_batch_bytes=1, val_batch_bytes=1, cores=16, free_bytes=None,
                        cpu_step=True, batches_per_epoch=3).train == 3


def test_eval_workers_follow_the_dev_shm_budget():
    """Validation batches of 8 x 640^2 x 3 bytes (9.83 MB, page-rounded): 2 workers keep 5 in flight (49.2 MB)."""
    from lucidyolo.data.worker_plan import plan_eval_workers

    class Source:  # only the instance counts and the meta of a source are read
        def meta(self):
            return {}

        def instances_per_image(self):
            import numpy as np

            return np.array([3, 5])

        def ragged_sizes_per_image(self):
            import numpy as np

            return np.zeros(2, int), np.zeros(2, int)

    batch = 8 * 640 * 640 * 3
    assert plan_eval_workers(Source(), (), 8, 640, free_bytes=None) == 2  # no /dev/shm: nothing to budget
    assert plan_eval_workers(Source(), (), 8, 640, free_bytes=16 << 20) == 0  # 16 MiB: not even 1 worker (3 batches)
    assert plan_eval_workers(Source(), (), 8, 640, free_bytes=8 * batch) == 1  # half of 8 batches: 3 fit, 5 do not
    assert plan_eval_workers(Source(), (), 8, 640, free_bytes=11 * batch) == 2
    assert plan_eval_workers(Source(), (), 1, 640, free_bytes=None) == 1  # never more workers than images per batch
