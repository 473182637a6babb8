"""Packed transport: a constant tensor count per batch, and an exact round trip of every field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lucidyolo.data.datasets import Sample
from lucidyolo.structures.packed import collate_packed, unpack
from lucidyolo.structures.targets import Polygons, Targets
from lucidyolo.tasks.registry import get_task

K = 3


def _targets(task: str, n: int, rng: np.random.Generator) -> Targets:
    xy = rng.uniform(0, 40, (n, 2))
    boxes = np.c_[xy, xy + rng.uniform(2, 20, (n, 2))].astype(np.float32)
    kw: dict = {}
    if task == "seg":
        rings, owners = [], []
        for i in range(n):
            for _ in range(int(rng.integers(1, 3))):  # 1-2 rings per instance
                rings.append(rng.uniform(0, 64, (int(rng.integers(3, 7)), 2)))
                owners.append(i)
        kw["polygons"] = Polygons.from_rings(rings, owners)
    if task == "obb":
        kw["rboxes"] = rng.uniform(0, 30, (n, 5)).astype(np.float32)
    if task == "pose":
        kw["keypoints"] = rng.uniform(0, 64, (n, K, 2)).astype(np.float32)
        kw["visibility"] = rng.integers(0, 3, (n, K)).astype(np.float32)
    return Targets(boxes, rng.integers(0, 5, n), rng.random(n) < 0.3, **kw)


def _samples(task: str, counts: list[int], seed: int = 0, gains: bool = False) -> list[Sample]:
    rng = np.random.default_rng(seed)
    return [
        Sample(
            image=torch.from_numpy(rng.integers(0, 256, (3, 16, 16), dtype=np.uint8)),
            targets=_targets(task, n, rng) if n or task != "pose" else Targets.empty_for_fields(("keypoints",), meta={"num_keypoints": K}),
            index=i,
            orig_hw=(30 + i, 40 + i),
            letterbox=(0.5, 1.0, 2.0),
            hsv_gains=rng.uniform(-0.1, 0.1, 3).astype(np.float32) if gains else None,
        )
        for i, n in enumerate(counts)
    ]


@pytest.mark.parametrize("task", ["det", "seg", "obb", "pose"])
@pytest.mark.parametrize("gains", [False, True])
def test_tensor_count_is_independent_of_batch_size_and_instance_count(task, gains):
    layouts = [[0], [5], [0, 0, 0], [3, 0, 7, 1], [40] * 16, [0] * 16]
    seen = {collate_packed(_samples(task, c, seed=i, gains=gains), get_task(task).fields).num_tensors for i, c in enumerate(layouts)}
    assert len(seen) == 1
    expected = 6 + {"det": 1, "seg": 4, "obb": 1, "pose": 3}[task] + int(gains)  # det, seg, pose: crowd flags
    assert seen == {expected}


@pytest.mark.parametrize("task", ["det", "seg", "obb", "pose"])
def test_unpack_restores_every_field_per_image(task):
    counts = [2, 0, 5, 1]
    samples = _samples(task, counts, seed=3)
    images, gt, meta = unpack(collate_packed(samples, get_task(task).fields), "cpu")
    assert images.dtype == torch.float32 and images.shape == (4, 3, 16, 16)
    torch.testing.assert_close(images[2], samples[2].image.float() / 255)
    m = max(counts)
    assert gt["boxes"].shape == (4, m, 4) and gt["mask"].sum(1).tolist() == counts
    for b, s in enumerate(samples):
        n = counts[b]
        t = s.targets
        np.testing.assert_array_equal(gt["boxes"][b, :n].numpy(), t.boxes)
        np.testing.assert_array_equal(gt["labels"][b, :n].numpy(), t.labels)
        np.testing.assert_array_equal(gt["difficult"][b, :n].numpy(), t.difficult)
        assert not gt["mask"][b, n:].any() and (gt["boxes"][b, n:] == 0).all()
        if task == "obb":
            np.testing.assert_array_equal(gt["rboxes"][b, :n].numpy(), t.rboxes)
        if task == "pose":
            np.testing.assert_array_equal(gt["keypoints"][b, :n].numpy(), t.keypoints)
            np.testing.assert_array_equal(gt["visibility"][b, :n].numpy(), t.visibility)
        if task == "seg":
            sel = (gt["poly_ring_image"] == b).nonzero().flatten()
            lengths = gt["poly_ring_lengths"]
            starts = torch.cumsum(lengths, 0) - lengths
            assert len(sel) == t.polygons.num_rings
            for j, r in enumerate(sel.tolist()):
                pts = gt["poly_points"][starts[r] : starts[r] + lengths[r]].numpy()
                np.testing.assert_array_equal(pts, t.polygons.ring(j))
                assert int(gt["poly_ring_slot"][r]) == int(t.polygons.ring_owner[j])
    assert meta["index"].tolist() == [0, 1, 2, 3]
    assert meta["orig_hw"][1].tolist() == [31, 41]
    torch.testing.assert_close(meta["letterbox"][0], torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64))


def test_empty_batch_unpacks_to_zero_width_padding():
    images, gt, _ = unpack(collate_packed(_samples("det", [0, 0])))
    assert gt["boxes"].shape == (2, 0, 4) and gt["mask"].shape == (2, 0)


def test_images_travel_as_uint8_and_batches_move_as_a_whole():
    batch = collate_packed(_samples("det", [1, 2]))
    assert batch.images.dtype == torch.uint8
    moved = batch.to("cpu")
    assert moved.num_tensors == batch.num_tensors and len(moved) == 2
