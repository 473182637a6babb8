"""EpochMAP: equals evaluate_coco, survives empty input, de-duplicates, syncs over gloo."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from lucidyolo.metrics.coco_eval import evaluate_coco
from lucidyolo.metrics.epoch_map import EpochMAP
from tests.gloo_ranks import run_ranks

NUM_CLASSES = 3


def make_batches(seed: int, n_batches: int = 3, b: int = 4, k: int = 20, m: int = 6) -> list[dict]:
    """Padded batches: GT boxes, detections = jittered GT + clutter, padding rows of score 0."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in range(n_batches):
        xy = torch.rand(b, m, 2, generator=g) * 200
        wh = torch.rand(b, m, 2, generator=g) * 60 + 4
        gt_boxes = torch.cat([xy, xy + wh], -1)  # (B, M, 4)
        gt_labels = torch.randint(0, NUM_CLASSES, (b, m), generator=g)
        gt_mask = torch.rand(b, m, generator=g) < 0.75
        gt_mask[0, :] = False  # an image without ground truth
        dets = torch.zeros(b, k, 6)
        jitter = (torch.randn(b, m, 4, generator=g) * 0.1) * wh.repeat(1, 1, 2)
        dets[:, :m, :4] = gt_boxes + jitter
        dets[:, :m, 4] = torch.rand(b, m, generator=g) * 0.9 + 0.1
        dets[:, :m, 5] = torch.where(torch.rand(b, m, generator=g) < 0.9, gt_labels, (gt_labels + 1) % NUM_CLASSES).float()
        cxy = torch.rand(b, 6, 2, generator=g) * 200
        dets[:, m : m + 6, :4] = torch.cat([cxy, cxy + 20], -1)
        dets[:, m : m + 6, 4] = torch.rand(b, 6, generator=g) * 0.5 + 0.01
        dets[:, m : m + 6, 5] = torch.randint(0, NUM_CLASSES, (b, 6), generator=g).float()
        # rows m+6.. stay zero: padding
        crowd = torch.zeros(b, m, dtype=torch.bool)
        crowd[1, 0] = True
        ids = torch.arange(n * b, (n + 1) * b)
        out.append(dict(dets=dets, gt_boxes=gt_boxes, gt_labels=gt_labels, gt_mask=gt_mask, image_ids=ids, gt_crowd=crowd))
    return out


def reference_coco(batches: list[dict]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Per-image loops, independent of the metric's vectorised rows."""
    images, anns, dets = [], [], []
    for batch in batches:
        for i in range(batch["dets"].shape[0]):
            img_id = int(batch["image_ids"][i])
            images.append({"id": img_id})
            for j in range(batch["gt_boxes"].shape[1]):
                if not batch["gt_mask"][i, j]:
                    continue
                x1, y1, x2, y2 = batch["gt_boxes"][i, j].double().tolist()
                anns.append({"id": len(anns) + 1, "image_id": img_id, "category_id": int(batch["gt_labels"][i, j]),
                             "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1),
                             "iscrowd": int(batch["gt_crowd"][i, j])})
            for row in batch["dets"][i].double().tolist():
                if row[4] > 0:
                    dets.append({"image_id": img_id, "category_id": int(row[5]),
                                 "bbox": [row[0], row[1], row[2] - row[0], row[3] - row[1]], "score": row[4]})
    cats = [{"id": c, "name": str(c)} for c in range(NUM_CLASSES)]
    return {"images": images, "annotations": anns, "categories": cats}, dets


def test_epoch_map_equals_evaluate_coco_on_the_same_data():
    batches = make_batches(0)
    metric = EpochMAP(num_classes=NUM_CLASSES)
    for batch in batches:
        metric.update(**batch)
    out = metric.compute()
    ref = evaluate_coco(*reference_coco(batches))
    assert metric.last_result is not None
    assert metric.last_result.stats == pytest.approx(ref.stats, abs=1e-12)
    assert out["mAP50-95"].item() == pytest.approx(ref.stats["AP"], abs=1e-6)
    assert out["mAP50"].item() == pytest.approx(ref.stats["AP50"], abs=1e-6)
    assert 0.1 < ref.stats["AP"] < 0.9


def test_empty_updates_change_nothing_and_alone_give_zero():
    empty = dict(
        dets=torch.zeros(2, 300, 6), gt_boxes=torch.zeros(2, 0, 4),
        gt_labels=torch.zeros(2, 0, dtype=torch.long), gt_mask=torch.zeros(2, 0, dtype=torch.bool),
    )
    no_images = dict(
        dets=torch.zeros(0, 300, 6), gt_boxes=torch.zeros(0, 0, 4),
        gt_labels=torch.zeros(0, 0, dtype=torch.long), gt_mask=torch.zeros(0, 0, dtype=torch.bool),
    )
    alone = EpochMAP(num_classes=NUM_CLASSES)
    alone.update(**empty)
    alone.update(**no_images)
    out = alone.compute()
    assert out["mAP50-95"].item() == 0.0 and out["mAP50"].item() == 0.0

    batches = make_batches(1, n_batches=1)
    plain, padded = EpochMAP(num_classes=NUM_CLASSES), EpochMAP(num_classes=NUM_CLASSES)
    plain.update(**batches[0])
    padded.update(**no_images)
    padded.update(**batches[0])
    assert padded.compute()["mAP50-95"] == plain.compute()["mAP50-95"]


def test_repeated_image_ids_are_counted_once():
    batches = make_batches(2, n_batches=2)
    once, twice = EpochMAP(num_classes=NUM_CLASSES), EpochMAP(num_classes=NUM_CLASSES)
    for batch in batches:
        once.update(**batch)
        twice.update(**batch)
    twice.update(**batches[0])  # DistributedSampler-style repeat of the first images
    assert twice.compute()["mAP50-95"] == once.compute()["mAP50-95"]
    # without ids every record is its own image: the repeat counts (and changes AP50)
    no_ids = EpochMAP(num_classes=NUM_CLASSES)
    for batch in [*batches, batches[0]]:
        no_ids.update(**{k: v for k, v in batch.items() if k != "image_ids"})
    assert no_ids.last_result is None
    no_ids.compute()
    assert no_ids.last_result.num_images == once.last_result.num_images + batches[0]["dets"].shape[0]


@pytest.mark.filterwarnings("ignore:.*was called before the ``update`` method")
def test_reset_forgets_everything():
    metric = EpochMAP(num_classes=NUM_CLASSES)
    metric.update(**make_batches(3, n_batches=1)[0])
    metric.reset()
    assert metric.compute()["mAP50-95"].item() == 0.0


def test_update_then_forward_accumulates_like_two_updates():
    batches = make_batches(5, n_batches=2)
    via_forward, via_update = EpochMAP(num_classes=NUM_CLASSES), EpochMAP(num_classes=NUM_CLASSES)
    via_forward.update(**batches[0])
    batch_value = via_forward(**batches[1])  # forward: resets, scores this batch alone, merges back
    for batch in batches:
        via_update.update(**batch)
    single = EpochMAP(num_classes=NUM_CLASSES)
    single.update(**batches[1])
    assert batch_value["mAP50-95"] == single.compute()["mAP50-95"]
    assert via_forward.compute()["mAP50-95"] == via_update.compute()["mAP50-95"]
    assert via_forward.last_result.num_images == 2 * batches[0]["dets"].shape[0]


def _scores(metric: EpochMAP) -> dict[str, float]:
    return {k: v.item() for k, v in metric.compute().items()}


def _rank_body(rank: int) -> dict:
    batches = make_batches(4)
    split = EpochMAP(num_classes=NUM_CLASSES)
    for batch in batches[:2] if rank == 0 else batches[2:]:
        split.update(**batch)
    if rank == 1:  # the sampler's padding repeats an image rank 0 already scored
        split.update(**{k: v[:1] for k, v in batches[0].items()})
    one_sided = EpochMAP(num_classes=NUM_CLASSES)  # rank 1 never updates
    if rank == 0:
        for batch in batches:
            one_sided.update(**batch)
    return {"split": _scores(split), "one_sided": _scores(one_sided)}


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_two_process_gloo_sync_equals_single_process(tmp_path):
    results = run_ranks(_rank_body, 2, tmp_path)
    single = EpochMAP(num_classes=NUM_CLASSES)
    for batch in make_batches(4):
        single.update(**batch)
    expected = _scores(single)
    assert expected["mAP50-95"] > 0.1
    for res in results:
        assert res["split"] == pytest.approx(expected, abs=0)
        assert res["one_sided"] == pytest.approx(expected, abs=0)
