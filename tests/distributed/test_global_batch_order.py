"""Two processes at batch 4 load the samples of one process at batch 8, in the same global batches,
augmented alike (issue 34, item 1): a sample is a function of (seed, epoch, position), never of the
rank, the worker or the batch it lands in."""

from __future__ import annotations

import torch

from lucidyolo.data.datasets import TrainDataset
from lucidyolo.data.loader import EpochSampler, build_train_loader
from lucidyolo.structures.packed import unpack
from tests.augment.scenes import rect_source
from tests.task_fields import fields_of


def test_the_sampler_order_is_written_down():
    """Position p of an epoch's permutation goes to process ``p % W``; its k-th batch of b is positions
    ``k b W + r, k b W + r + W, ...``: global batch k is positions ``k b W .. (k + 1) b W - 1``."""
    single = [p for _, p, _ in EpochSampler(20, seed=5, rank=0, world_size=1)]
    ranks = [[p for _, p, _ in EpochSampler(20, seed=5, rank=r, world_size=2)] for r in (0, 1)]
    assert single == list(range(20))
    assert ranks == [list(range(0, 20, 2)), list(range(1, 20, 2))]
    # the same image at the same position, whichever the process
    index = {p: i for _, p, i in EpochSampler(20, seed=5)}
    for r in (0, 1):
        assert all(index[p] == i for _, p, i in EpochSampler(20, seed=5, rank=r, world_size=2))
    # a split that is not a multiple of the processes is padded by wrapping: 21 -> 22 positions
    padded = sorted(p for r in (0, 1) for _, p, _ in EpochSampler(21, seed=5, rank=r, world_size=2))
    assert padded == list(range(22))


def _images(source, batch: int, rank: int, world: int, workers: int) -> list[torch.Tensor]:
    ds = TrainDataset(
        source, 64, "n", seed=7, epochs=10
    )  # mosaic on: partners are drawn per sample too
    loader = build_train_loader(
        ds, batch, fields_of("det"), num_workers=workers, seed=7, rank=rank, world_size=world
    )
    loader.set_epoch(1)
    return [unpack(b)[0] for b in loader]


def test_two_processes_at_batch_4_see_one_process_at_batch_8(tmp_path):
    source = rect_source(tmp_path, "det", n=16)
    one = _images(source, 8, 0, 1, workers=0)
    # different worker counts on the two processes: nothing may depend on them
    rank0, rank1 = _images(source, 4, 0, 2, workers=0), _images(source, 4, 1, 2, workers=1)
    assert len(one) == len(rank0) == len(rank1) == 2
    for whole, a, b in zip(one, rank0, rank1, strict=True):
        assert torch.equal(whole[0::2], a) and torch.equal(whole[1::2], b)
    assert not torch.equal(one[0][0::2], one[1][0::2])  # the check can fail: the batches differ
