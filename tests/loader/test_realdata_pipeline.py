"""The training pipeline on real COCO files: every task field valid, batches packed, workers alive."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.data.datasets import TrainDataset, ValDataset
from lucidyolo.data.loader import build_train_loader
from lucidyolo.structures.packed import unpack
from lucidyolo.tasks.registry import get_task
from tests.conftest import real_data_root
from tests.task_fields import fields_of

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def coco128():
    root = real_data_root()
    if root is None or not (root / "coco128_coco").is_dir():
        pytest.skip("real data (../shared/data/coco128_coco or LUCID_REAL_DATA) is absent")
    from lucidyolo.data.layouts import open_source

    return open_source(root / "coco128_coco", "train", fields_of("seg"))


def test_real_coco_samples_stay_inside_the_frame(coco128):
    ds = TrainDataset(coco128, 320, "x", seed=0)
    for i in range(6):
        s = ds[(0, i)]
        s.targets.validate()
        b = s.targets.boxes
        assert s.image.shape == (3, 320, 320)
        if len(b):
            assert b[:, 0].min() >= -1 and b[:, 2].max() <= 320 and np.all(b[:, 2] - b[:, 0] >= 2)


def test_real_coco_loader_with_workers_and_val_inverse(coco128):
    loader = build_train_loader(TrainDataset(coco128, 320, "s", seed=0), 4, get_task("seg").fields, num_workers=2)
    it = iter(loader)
    batches = [next(it) for _ in range(2)]
    assert {b.num_tensors for b in batches} == {10}  # 6 + 3 polygon tensors + crowd flags
    images, gt, _ = unpack(batches[0])
    assert images.shape == (4, 3, 320, 320) and gt["mask"].sum() == batches[0].counts.sum()
    v = ValDataset(coco128, 320)[0]
    h, w = v.orig_hw
    scale, px, py = v.letterbox
    assert max(h, w) * scale == pytest.approx(320) and (v.image[:, : int(py)] == 114).all()
