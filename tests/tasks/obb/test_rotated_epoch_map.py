"""RotatedEpochMAP: padded batches in, rotated_map numbers out; dedup, reset, difficult, the real packed layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lucidyolo.data.datasets import Sample
from lucidyolo.structures.packed import collate_packed, unpack
from lucidyolo.structures.targets import Targets
from lucidyolo.tasks.obb.epoch_map import RotatedEpochMAP
from lucidyolo.tasks.obb.rotated_map import rotated_map

N_ROWS = 300


def _image(rng: np.random.Generator, m: int, num_classes: int = 3):
    """GT rboxes/labels/difficult and noisy detections of one tile (network-input pixels)."""
    gt = np.column_stack([rng.uniform(50, 600, (m, 2)), rng.uniform(15, 60, (m, 2)), rng.uniform(-0.7, 2.3, m)])
    lab = rng.integers(0, num_classes, m)
    dif = rng.random(m) < 0.2
    src = rng.integers(0, max(m, 1), 2 * m) if m else np.zeros(0, np.int64)
    det = gt[src] + np.column_stack([rng.normal(0, 2, (src.size, 2)), rng.normal(0, 2, (src.size, 2)),
                                     rng.normal(0, 0.05, src.size)]) if m else np.zeros((0, 5))  # fmt: skip
    det = np.concatenate([det, np.column_stack([rng.uniform(0, 640, (5, 2)), rng.uniform(10, 50, (5, 2)),
                                                rng.uniform(0, 1, 5)])])  # fmt: skip
    dlab = np.concatenate([lab[src] if m else np.zeros(0, np.int64), rng.integers(0, num_classes, 5)])
    score = rng.uniform(0.05, 1.0, dlab.size)
    return (gt, lab, dif), (det, score, dlab)


def _batch(images, m_pad: int | None = None):
    """Padded ``decoded (B, 300, 7)`` and ``gt`` dict as ``unpack`` lays them out."""
    b = len(images)
    m = m_pad if m_pad is not None else max((len(g[1]) for g, _ in images), default=0)
    decoded = torch.zeros((b, N_ROWS, 7))
    gt = {"rboxes": torch.zeros((b, m, 5)), "labels": torch.zeros((b, m), dtype=torch.long),
          "mask": torch.zeros((b, m), dtype=torch.bool), "difficult": torch.zeros((b, m), dtype=torch.bool),
          "boxes": torch.zeros((b, m, 4))}  # fmt: skip
    for i, ((g, lab, dif), (d, s, dl)) in enumerate(images):
        n = len(s)
        order = np.random.default_rng(i).permutation(n)  # rows need not be sorted
        decoded[i, :n] = torch.from_numpy(np.column_stack([d, s, dl])[order]).float()
        k = len(lab)
        gt["rboxes"][i, :k] = torch.from_numpy(g).float()
        gt["labels"][i, :k] = torch.from_numpy(lab)
        gt["mask"][i, :k] = True
        gt["difficult"][i, :k] = torch.from_numpy(dif)
    return decoded, gt


def _expected(images, num_classes=3):
    f32 = lambda a: np.asarray(a, np.float32).astype(np.float64)  # noqa: E731  the batch is float32
    dets = [(f32(d), f32(s), dl) for _, (d, s, dl) in images]
    gts = [(f32(g), lab, dif) for (g, lab, dif), _ in images]
    return rotated_map(dets, gts, num_classes, max_dets=300)


def test_matches_rotated_map_over_batches_with_dedup_and_reset():
    rng = np.random.default_rng(0)
    images = [_image(rng, int(rng.integers(0, 8))) for _ in range(7)]
    metric = RotatedEpochMAP(num_classes=3)
    for start in (0, 4):
        part = images[start : start + 4]
        decoded, gt = _batch(part)
        metric.update(decoded, gt, {"index": torch.arange(start, start + len(part))})
    # A repeated image (e.g. a padded last batch) keeps its first record.
    decoded, gt = _batch(images[:1])
    metric.update(decoded, gt, {"index": torch.tensor([0])})
    out = metric.compute()
    ref = _expected(images)
    assert set(out) == {"rotated_mAP50-95", "rotated_mAP50", "rotated_precision", "rotated_recall"}
    assert out["rotated_mAP50-95"].dtype == torch.float32
    assert float(out["rotated_mAP50-95"]) == pytest.approx(ref.map50_95, abs=1e-6)
    assert float(out["rotated_mAP50"]) == pytest.approx(ref.map50, abs=1e-6)
    assert 0.1 < ref.map50_95 < 1.0
    assert metric.last_result is not None and metric.last_result.map75 == pytest.approx(ref.map75)
    metric.reset()
    assert float(metric.compute()["rotated_mAP50-95"]) == 0.0 and metric.last_result is None


def test_perfect_and_difficult_and_no_index():
    rng = np.random.default_rng(1)
    g = np.column_stack([rng.uniform(50, 500, (4, 2)), rng.uniform(20, 40, (4, 2)), rng.uniform(0, 1, 4)])
    lab, dif = np.array([0, 1, 1, 2]), np.array([False, False, False, True])
    # Perfect on the easy GTs; the detection on the difficult one is ignored, not a false positive.
    images = [((g, lab, dif), (g.copy(), np.array([0.9, 0.8, 0.7, 0.95]), lab.copy()))]
    metric = RotatedEpochMAP()  # num_classes from the labels seen
    decoded, gt = _batch(images, m_pad=6)
    metric.update(decoded, gt, {})
    out = metric.compute()
    assert float(out["rotated_mAP50-95"]) == pytest.approx(1.0)
    assert metric.last_result is not None
    assert metric.last_result.npos.tolist() == [1, 2, 0] and np.isnan(metric.last_result.ap50_95[2])
    # Without an index every image is new.
    metric.update(decoded, gt, {})
    assert len(metric._images) == 2


def test_only_difficult_gt_scores_zero_not_nan():
    g = np.array([[100.0, 100.0, 30.0, 20.0, 0.2]])
    images = [((g, np.array([0]), np.array([True])), (g.copy(), np.array([0.9]), np.array([0])))]
    metric = RotatedEpochMAP(num_classes=2)
    metric.update(*_batch(images), {"index": torch.tensor([3])})
    assert {k: float(v) for k, v in metric.compute().items()} == {
        "rotated_mAP50-95": 0.0, "rotated_mAP50": 0.0, "rotated_precision": 0.0, "rotated_recall": 0.0}


def test_rejects_upright_rows():
    metric = RotatedEpochMAP(num_classes=1)
    _, gt = _batch([])
    with pytest.raises(ValueError, match="7"):
        metric.update(torch.zeros((1, 300, 6)), gt, {})


def test_real_packed_layout():
    # Through collate_packed + unpack with the obb task's field: gt keys and padding as training sees them.
    rng = np.random.default_rng(2)
    samples, images = [], []
    for i, m in enumerate([3, 0, 5]):
        (g, lab, dif), det = _image(rng, m)
        rb = g.astype(np.float32)
        xyxy = np.concatenate([rb[:, :2] - rb[:, 2:4] / 2, rb[:, :2] + rb[:, 2:4] / 2], 1) if m else np.zeros((0, 4))
        targets = Targets(xyxy, lab, dif, rboxes=rb)
        samples.append(Sample(image=torch.zeros((3, 8, 8), dtype=torch.uint8), targets=targets, index=10 + i,
                              orig_hw=(640, 640), letterbox=(1.0, 0.0, 0.0), hsv_gains=None))  # fmt: skip
        images.append(((g, lab, dif), det))
    _, gt, meta = unpack(collate_packed(samples, ("rboxes",)), "cpu")
    decoded, _ = _batch(images)
    metric = RotatedEpochMAP(num_classes=3)
    metric.update(decoded, gt, meta)
    assert sorted(metric._images) == [10, 11, 12]
    assert float(metric.compute()["rotated_mAP50-95"]) == pytest.approx(_expected(images).map50_95, abs=1e-6)
