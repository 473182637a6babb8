"""Real multi-process loading: a batch is a function of (seed, epoch, position), whatever the worker count."""

from __future__ import annotations

import torch

from lucidyolo.data.datasets import TrainDataset
from lucidyolo.data.loader import build_train_loader
from lucidyolo.tasks.registry import get_task
from tests.augment.scenes import rect_source
from tests.task_fields import fields_of


def _epoch_batches(source, workers: int, epoch: int, seed: int = 3, variant: str = "x", task: str = "seg"):
    ds = TrainDataset(source, 64, variant, seed=seed, device_hsv=variant == "x")  # gains travel in the batch
    loader = build_train_loader(ds, 2, get_task(task).fields, num_workers=workers, seed=seed)
    loader.set_epoch(epoch)
    return list(loader)


def _same(a, b) -> bool:
    ta, tb = a.tensors(), b.tensors()
    # meta holds NaN for mosaic samples (no single letterbox): NaN == NaN here
    return ta.keys() == tb.keys() and all(
        ta[k].shape == tb[k].shape and bool(((ta[k] == tb[k]) | (ta[k].isnan() & tb[k].isnan()) if ta[k].is_floating_point() else ta[k] == tb[k]).all())
        for k in ta
    )


def test_a_batch_is_the_same_with_zero_one_or_two_workers(tmp_path):
    source = rect_source(tmp_path, "seg", n=8)
    zero = _epoch_batches(source, 0, epoch=1)
    assert len(zero) == 4
    for workers in (1, 2):
        assert all(_same(a, b) for a, b in zip(zero, _epoch_batches(source, workers, epoch=1), strict=True))


def test_samples_and_epochs_draw_different_augmentation_streams(tmp_path):
    source = rect_source(tmp_path, "seg", n=8)
    e0 = _epoch_batches(source, 2, epoch=0)
    e1 = _epoch_batches(source, 2, epoch=1)
    gains0 = torch.cat([b.hsv_gains for b in e0])
    assert torch.unique(gains0, dim=0).shape[0] == gains0.shape[0]  # no replayed draws at all
    # a new epoch gives every sample a new stream
    assert all(not torch.equal(a.hsv_gains, b.hsv_gains) for a, b in zip(e0, e1, strict=True))
    # the packed batch keeps its tensor count across real worker transport
    assert {b.num_tensors for b in e0 + e1} == {11}  # 6 + 3 polygon tensors + crowd flags + gains


def test_the_epoch_set_after_iter_decides_the_batches(tmp_path):
    """Lightning calls ``iter()`` before ``set_epoch`` (at setup, and for a resumed run's first epoch)."""
    source = rect_source(tmp_path, "det", n=6)
    ds = TrainDataset(source, 64, "n", seed=3)
    loader = build_train_loader(ds, 2, fields_of("det"), num_workers=1, seed=3)
    it = iter(loader)
    loader.sampler.set_epoch(2)
    late = list(it)
    assert all(_same(a, b) for a, b in zip(late, _epoch_batches(source, 1, epoch=2, variant="n", task="det"), strict=True))
    assert not _same(late[0], _epoch_batches(source, 1, epoch=0, variant="n", task="det")[0])
