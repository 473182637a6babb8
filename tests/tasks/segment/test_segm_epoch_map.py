"""SegmEpochMAP: perfect masks, right box / wrong mask, pycocotools on hand-built dicts, dedup, sync."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from lucidyolo.metrics.epoch_map import EpochMAP, top_per_class
from lucidyolo.metrics.mapping import clip_to_image
from lucidyolo.tasks.segment.epoch_map import SegmEpochMAP, pack_bytes, unpack_bytes
from lucidyolo.tasks.segment.mask_assembly import masks_in_input
from lucidyolo.tasks.segment.mask_detections import MaskDetections
from tests.gloo_ranks import run_ranks

# pycocotools' single-RLE decode (used by the tests only) trips a numpy 2 deprecation
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword")

NUM_CLASSES = 3
S = 64  # network input side
HP = 16  # prototype side (stride 4)
# original 96 x 128 letterboxed at 0.5: the image occupies input y in [8, 56), x in [0, 64)
LETTERBOX = (0.5, 0.0, 8.0)
ORIG_HW = (96, 128)
REGION = (0.0, 8.0, 64.0, 56.0)  # x0, y0, x1, y1 of the image inside the input


def make_batch(instances: list[list[dict[str, Any]]], preds: list[list[dict[str, Any]]], index: list[int],
               k: int = 8, p: int | None = None) -> tuple[MaskDetections, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A padded batch from per-image instances and predictions.

    ``instances[b]``: dicts ``rings`` (list of ``(n, 2)`` point lists), ``label``,
    optional ``crowd`` and ``box`` (default: the rings' extent), ``valid``
    (default True; False leaves a padding slot). ``preds[b]``: dicts ``box``,
    ``score``, ``label``, ``proto`` ``(HP, HP)`` logits (each prediction gets its
    own prototype, coefficient 1).
    """
    b = len(instances)
    m = max([len(x) for x in instances] + [1])
    p = p or max([len(x) for x in preds] + [1])
    boxes, labels = torch.zeros(b, m, 4), torch.zeros(b, m, dtype=torch.long)
    mask, crowd = torch.zeros(b, m, dtype=torch.bool), torch.zeros(b, m, dtype=torch.bool)
    pts, lengths, ring_image, ring_slot = [], [], [], []
    for i, image in enumerate(instances):
        for j, inst in enumerate(image):
            mask[i, j] = inst.get("valid", True)
            crowd[i, j] = inst.get("crowd", False)
            labels[i, j] = inst["label"]
            allp = np.concatenate([np.asarray(r, float) for r in inst["rings"]]) if inst["rings"] else np.zeros((0, 2))
            box = inst.get("box") or [*allp.min(0), *allp.max(0)]
            boxes[i, j] = torch.tensor(box)
            for r in inst["rings"]:
                pts += [list(map(float, q)) for q in r]
                lengths.append(len(r))
                ring_image.append(i)
                ring_slot.append(j)
    rows, coeffs = torch.zeros(b, k, 6), torch.zeros(b, k, p)
    protos = torch.full((b, p, HP, HP), -10.0)
    for i, image in enumerate(preds):
        for j, d in enumerate(image):
            rows[i, j] = torch.tensor([*d["box"], d["score"], d["label"]])
            coeffs[i, j, j] = 1.0
            protos[i, j] = torch.as_tensor(d["proto"], dtype=torch.float32)
    gt = {
        "boxes": boxes, "labels": labels, "mask": mask, "crowd": crowd,
        "poly_points": torch.tensor(pts, dtype=torch.float32).reshape(-1, 2),
        "poly_ring_lengths": torch.tensor(lengths, dtype=torch.long),
        "poly_ring_image": torch.tensor(ring_image, dtype=torch.long),
        "poly_ring_slot": torch.tensor(ring_slot, dtype=torch.long),
    }
    meta = {
        "letterbox": torch.tensor([LETTERBOX] * b, dtype=torch.float32).reshape(b, 3),
        "orig_hw": torch.tensor([ORIG_HW] * b, dtype=torch.long).reshape(b, 2),
        "index": torch.tensor(index, dtype=torch.long),
    }
    return MaskDetections(rows, coeffs, protos), gt, meta


def rect(x0: int, y0: int, x1: int, y1: int) -> list[list[int]]:
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def rect_proto(x0: int, y0: int, x1: int, y1: int, grow: int = 1) -> np.ndarray:
    """+10 on the prototype pixels of an input rectangle (multiples of 4) grown by ``grow``, -10 elsewhere.

    Grown by one prototype pixel, the interpolated logit is +10 at every pixel centre
    of the rectangle (no rounded corners), so the box crop alone shapes the mask.
    """
    out = np.full((HP, HP), -10.0)
    out[max(y0 // 4 - grow, 0):y1 // 4 + grow, max(x0 // 4 - grow, 0):x1 // 4 + grow] = 10.0
    return out


def test_perfect_predictions_score_one():
    gts = [
        [(rect(4, 12, 20, 28), 0), (rect(32, 16, 60, 52), 1)],
        [(rect(8, 8, 24, 40), 2), (rect(40, 20, 56, 36), 2), (rect(12, 44, 44, 56), 0)],
    ]
    metric = SegmEpochMAP(num_classes=NUM_CLASSES)
    for batch in range(2):  # the same layout twice, as two more images
        instances = [[{"rings": [r], "label": c} for r, c in image] for image in gts]
        preds = [
            [{"box": [r[0][0], r[0][1], r[2][0], r[2][1]], "score": 0.9 - 0.1 * j, "label": c,
              "proto": rect_proto(r[0][0], r[0][1], r[2][0], r[2][1])} for j, (r, c) in enumerate(image)]
            for image in gts
        ]
        metric.update(*make_batch(instances, preds, index=[2 * batch, 2 * batch + 1]))
    out = metric.compute()
    assert all(v.dtype == torch.float32 for v in out.values())
    assert {k: v.item() for k, v in out.items()} == pytest.approx(
        {"mAP50-95": 1.0, "mAP50": 1.0, "segm_mAP50-95": 1.0, "segm_mAP50": 1.0, "precision": 1.0, "recall": 1.0,
         "segm_precision": 1.0, "segm_recall": 1.0}, abs=1e-6)
    assert metric.last_segm_result is not None and metric.last_segm_result.num_images == 4


def test_right_box_wrong_mask_scores_box_one_segm_zero():
    gt_rect = (8, 12, 40, 44)  # 32 x 32
    instances = [[{"rings": [rect(*gt_rect)], "label": 1}]]
    # the mask covers only the top-left 8 x 8 of the (correct) box: IoU 1/16
    preds = [[{"box": list(gt_rect), "score": 0.8, "label": 1, "proto": rect_proto(8, 12, 16, 20, grow=0)}]]
    metric = SegmEpochMAP(num_classes=NUM_CLASSES)
    metric.update(*make_batch(instances, preds, index=[0]))
    out = {k: v.item() for k, v in metric.compute().items()}
    assert out["mAP50-95"] == pytest.approx(1.0) and out["mAP50"] == pytest.approx(1.0)
    assert out["segm_mAP50-95"] == 0.0 and out["segm_mAP50"] == 0.0


def _quad(rng: np.random.Generator, cx: float, cy: float, r: float) -> list[list[float]]:
    ang = np.sort(rng.uniform(0, 2 * np.pi, 4))
    rad = r * rng.uniform(0.6, 1.0, 4)
    pts = np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], axis=1)
    pts = np.clip(pts, [REGION[0], REGION[1]], [REGION[2], REGION[3]])
    return pts.round(2).tolist()


def random_case(seed: int, b: int = 3, m: int = 4) -> tuple[list, list]:
    """Random polygon GT (multi-ring, crowd, padding slots) and decent-but-imperfect predictions."""
    rng = np.random.default_rng(seed)
    instances, preds = [], []
    for _ in range(b):
        image, dets = [], []
        for j in range(int(rng.integers(1, m + 1))):
            cx, cy = rng.uniform(14, 50), rng.uniform(20, 44)
            rings = [_quad(rng, cx, cy, rng.uniform(6, 14))]
            if rng.random() < 0.3:  # a second part
                rings.append(_quad(rng, rng.uniform(10, 54), rng.uniform(14, 50), rng.uniform(3, 6)))
            label = int(rng.integers(0, NUM_CLASSES))
            inst = {"rings": rings, "label": label, "crowd": bool(rng.random() < 0.12),
                    "valid": j != 2 or rng.random() < 0.5}
            image.append(inst)
            if not inst["valid"] or rng.random() < 0.15:
                continue
            # the prediction's prototype: the GT's coverage of each prototype pixel, noisy
            full = np.zeros((S, S), bool)
            for r in rings:
                full |= mask_utils.decode(mask_utils.frPyObjects([np.ravel(r).tolist()], S, S)[0]).astype(bool)
            cover = full.reshape(HP, 4, HP, 4).mean(axis=(1, 3))
            proto = 12 * (cover - 0.5) + rng.normal(0, 2.0, (HP, HP))
            allp = np.concatenate([np.asarray(r) for r in rings])
            box = np.concatenate([allp.min(0), allp.max(0)]) + rng.normal(0, 1.5, 4)
            if rng.random() < 0.3:
                box[0] -= 12  # hangs over the left edge of the image: clipped before scoring
            dets.append({"box": box.tolist(), "score": float(rng.uniform(0.1, 1.0)),
                         "label": label if rng.random() > 0.1 else (label + 1) % NUM_CLASSES, "proto": proto})
        for _ in range(int(rng.integers(0, 3))):  # clutter
            xy = rng.uniform(0, 44, 2)
            dets.append({"box": [*xy, *(xy + rng.uniform(4, 20, 2))], "score": float(rng.uniform(0.05, 0.5)),
                         "label": int(rng.integers(0, NUM_CLASSES)), "proto": rng.normal(0, 5, (HP, HP))})
        instances.append(image)
        preds.append(dets)
    return instances, preds


def reference_dicts(batches: list[tuple]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """COCO dicts built per image by hand: GT polygons as pycocotools polygons, crowd as its box polygon."""
    images, anns, dets = [], [], []
    for decoded, gt, meta in batches:
        for i in range(decoded.rows.shape[0]):
            img_id = int(meta["index"][i])
            images.append({"id": img_id, "height": S, "width": S})
            for j in range(gt["mask"].shape[1]):
                if not gt["mask"][i, j]:
                    continue
                x1, y1, x2, y2 = gt["boxes"][i, j].double().tolist()
                if gt["crowd"][i, j]:
                    seg = [[x1, y1, x2, y1, x2, y2, x1, y2]]
                else:
                    sel = ((gt["poly_ring_image"] == i) & (gt["poly_ring_slot"] == j)).nonzero()[:, 0].tolist()
                    starts = np.concatenate([[0], np.cumsum(gt["poly_ring_lengths"].numpy())])
                    seg = [gt["poly_points"][starts[r]:starts[r + 1]].double().reshape(-1).tolist() for r in sel]
                area = float(mask_utils.area(mask_utils.merge(mask_utils.frPyObjects(seg, S, S))))
                anns.append({"id": len(anns) + 1, "image_id": img_id, "category_id": int(gt["labels"][i, j]),
                             "bbox": [x1, y1, x2 - x1, y2 - y1], "area": area,
                             "iscrowd": int(gt["crowd"][i, j]), "segmentation": seg})
            rows = decoded.rows[i].clone()
            # clip to the image inside the letterbox, by hand
            rows[:, [0, 2]] = rows[:, [0, 2]].clamp(REGION[0], REGION[2])
            rows[:, [1, 3]] = rows[:, [1, 3]].clamp(REGION[1], REGION[3])
            masks = masks_in_input(MaskDetections(rows, decoded.coeffs[i], decoded.protos[i]), S, S)
            valid = rows[rows[:, 4] > 0].double().tolist()
            for row, msk in zip(valid, masks, strict=True):
                rle = mask_utils.encode(np.asfortranarray(msk.astype(np.uint8)))
                rle["counts"] = rle["counts"].decode("ascii")
                dets.append({"image_id": img_id, "category_id": int(row[5]), "score": row[4],
                             "bbox": [row[0], row[1], row[2] - row[0], row[3] - row[1]], "segmentation": rle})
    cats = [{"id": c, "name": str(c)} for c in range(NUM_CLASSES)]
    return {"images": images, "annotations": anns, "categories": cats}, dets


def pycocotools_stats(gt: dict[str, Any], dets: list[dict[str, Any]], iou_type: str) -> np.ndarray:
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = json.loads(json.dumps(gt))
        coco.createIndex()
        e = COCOeval(coco, coco.loadRes(json.loads(json.dumps(dets))), iouType=iou_type)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e.stats


def make_batches(seed: int, n: int = 3, b: int = 3) -> list[tuple]:
    out = []
    for t in range(n):
        instances, preds = random_case(seed * 100 + t, b=b)
        out.append(make_batch(instances, preds, index=list(range(t * b, (t + 1) * b)), k=10))
    return out


def test_equals_pycocotools_on_hand_built_dicts():
    batches = make_batches(0)
    metric = SegmEpochMAP(num_classes=NUM_CLASSES)
    for batch in batches:
        metric.update(*batch)
    out = metric.compute()
    gt, dets = reference_dicts(batches)
    segm = pycocotools_stats(gt, dets, "segm")
    # EpochMAP's box ground truth has the box area (COCO's area is the mask's pixel count)
    box_gt = {**gt, "annotations": [{**a, "area": a["bbox"][2] * a["bbox"][3]} for a in gt["annotations"]]}
    box = pycocotools_stats(box_gt, [{k: v for k, v in d.items() if k != "segmentation"} for d in dets], "bbox")
    assert metric.last_segm_result is not None and metric.last_result is not None
    np.testing.assert_allclose(metric.last_segm_result.stats_array(), segm, atol=1e-12)
    np.testing.assert_allclose(metric.last_result.stats_array(), box, atol=1e-12)
    assert out["segm_mAP50-95"].item() == pytest.approx(segm[0], abs=1e-6)
    assert out["segm_mAP50"].item() == pytest.approx(segm[1], abs=1e-6)
    assert 0.1 < segm[0] < 0.9 and segm[0] != pytest.approx(box[0], abs=1e-3)  # masks are scored, not boxes
    assert any(a["iscrowd"] for a in gt["annotations"])


def test_box_numbers_are_epoch_maps_with_the_clipped_rows():
    batches = make_batches(1)
    seg, det = SegmEpochMAP(num_classes=NUM_CLASSES), EpochMAP(num_classes=NUM_CLASSES)
    for decoded, gt, meta in batches:
        seg.update(decoded, gt, meta)
        det.update(clip_to_image(decoded.rows, meta), gt["boxes"], gt["labels"], gt["mask"], meta["index"],
                   gt_crowd=gt["crowd"])
    a, b = seg.compute(), det.compute()
    assert a["mAP50-95"] == b["mAP50-95"] and a["mAP50"] == b["mAP50"]


def test_repeated_image_ids_are_counted_once():
    batches = make_batches(2, n=2)
    once, twice = SegmEpochMAP(num_classes=NUM_CLASSES), SegmEpochMAP(num_classes=NUM_CLASSES)
    for batch in batches:
        once.update(*batch)
        twice.update(*batch)
    decoded, gt, meta = batches[0]
    # the sampler's repeat of the first images, here with different (useless) masks: ignored
    junk = MaskDetections(decoded.rows, decoded.coeffs, -decoded.protos)
    twice.update(junk, gt, meta)
    a, b = once.compute(), twice.compute()
    assert {k: v.item() for k, v in a.items()} == {k: v.item() for k, v in b.items()}
    assert twice.last_segm_result.num_images == once.last_segm_result.num_images == 6
    # without ids each record is its own image, and the junk masks count
    no_ids = SegmEpochMAP(num_classes=NUM_CLASSES)
    for d, g, mt in [*batches, (junk, gt, meta)]:
        no_ids.update(d, g, {k: v for k, v in mt.items() if k != "index"})
    res = no_ids.compute()
    assert no_ids.last_segm_result.num_images == 9
    assert res["segm_mAP50-95"] < a["segm_mAP50-95"]


@pytest.mark.filterwarnings("ignore:.*was called before the ``update`` method")
def test_empty_metric_and_no_ground_truth_give_zero():
    assert {k: v.item() for k, v in SegmEpochMAP().compute().items()} == {
        "mAP50-95": 0.0, "mAP50": 0.0, "segm_mAP50-95": 0.0, "segm_mAP50": 0.0,
        "precision": 0.0, "recall": 0.0, "segm_precision": 0.0, "segm_recall": 0.0}
    metric = SegmEpochMAP(num_classes=NUM_CLASSES)
    preds = [[{"box": [4, 10, 20, 30], "score": 0.5, "label": 0, "proto": rect_proto(4, 12, 20, 28)}], []]
    metric.update(*make_batch([[], []], preds, index=[0, 1]))
    assert all(v.item() == 0.0 for v in metric.compute().values())
    # a batch of no images changes nothing
    batches = make_batches(6, n=1)
    plain, padded = SegmEpochMAP(num_classes=NUM_CLASSES), SegmEpochMAP(num_classes=NUM_CLASSES)
    plain.update(*batches[0])
    padded.update(*make_batch([], [], index=[]))
    padded.update(*batches[0])
    assert {k: v.item() for k, v in padded.compute().items()} == {k: v.item() for k, v in plain.compute().items()}


def test_update_then_forward_accumulates_like_two_updates():
    batches = make_batches(5, n=2)
    via_forward, via_update, single = (SegmEpochMAP(num_classes=NUM_CLASSES) for _ in range(3))
    via_forward.update(*batches[0])
    batch_value = via_forward(*batches[1])  # forward: resets, scores this batch alone, merges back
    for batch in batches:
        via_update.update(*batch)
    single.update(*batches[1])
    assert {k: v.item() for k, v in batch_value.items()} == {k: v.item() for k, v in single.compute().items()}
    assert {k: v.item() for k, v in via_forward.compute().items()} == {
        k: v.item() for k, v in via_update.compute().items()}


def test_top_per_class_keeps_cocoeval_s_detections():
    g = torch.Generator().manual_seed(0)
    rows = torch.zeros(2, 40, 6)
    rows[..., 4] = (torch.rand(2, 40, generator=g) * 4).round() / 4 + 0.25  # many ties
    rows[..., 5] = torch.randint(0, 3, (2, 40), generator=g).float()
    rows[0, 30:, 4] = 0.0  # padding
    got = top_per_class(rows, 5)
    for b in range(2):
        for c in range(3):
            idx = [i for i in range(40) if rows[b, i, 5] == c and rows[b, i, 4] > 0]
            best = sorted(idx, key=lambda i: -rows[b, i, 4].item())[:5]  # stable: ties keep row order
            kept = [i for i in range(40) if rows[b, i, 5] == c and got[b, i, 4] > 0]
            assert kept == sorted(best)
    assert torch.equal(got[got[..., 4] > 0], rows[got[..., 4] > 0])


def test_max_dets_changes_no_stat():
    rng = np.random.default_rng(4)
    instances = [[{"rings": [rect(8, 12, 40, 44)], "label": 0}, {"rings": [rect(44, 20, 60, 52)], "label": 0}]]
    preds = [[{"box": [*xy, *(xy + rng.uniform(6, 30, 2))], "score": float(rng.uniform(0.05, 1)), "label": 0,
               "proto": rng.normal(0, 6, (HP, HP))} for xy in rng.uniform(0, 40, (130, 2))]]
    batch = make_batch(instances, preds, index=[0], k=130)
    capped, full = SegmEpochMAP(num_classes=1), SegmEpochMAP(num_classes=1, max_dets=None)
    capped.update(*batch)
    full.update(*batch)
    capped.compute()
    full.compute()
    assert capped.last_segm_result.num_detections == 100 and full.last_segm_result.num_detections == 130
    assert capped.last_segm_result.stats == full.last_segm_result.stats
    assert capped.last_result.stats == full.last_result.stats


def test_byte_packing_round_trips():
    blobs = [b"", b"a", b"abcdef", b"abcdefg", bytes(range(256)), b"\x00\xff" * 7]
    words, lengths = pack_bytes(blobs)
    assert words.dtype == np.float64 and words.max() < 2.0**48
    assert unpack_bytes(words, lengths) == blobs
    assert unpack_bytes(*pack_bytes([])) == []


def _scores(metric: SegmEpochMAP) -> dict[str, float]:
    return {k: v.item() for k, v in metric.compute().items()}


def _rank_body(rank: int) -> dict:
    batches = make_batches(3)
    split = SegmEpochMAP(num_classes=NUM_CLASSES)
    for batch in batches[:1] if rank == 0 else batches[1:]:
        split.update(*batch)
    if rank == 1:  # the sampler's padding repeats an image rank 0 already scored
        mt = batches[0][2]
        split.update(*make_batch(*random_case(77, b=1), index=[int(mt["index"][0])], k=10))
    one_sided = SegmEpochMAP(num_classes=NUM_CLASSES)  # rank 1 never updates
    if rank == 0:
        for batch in batches:
            one_sided.update(*batch)
    return {"split": _scores(split), "one_sided": _scores(one_sided)}


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_two_process_gloo_sync_equals_single_process(tmp_path):
    results = run_ranks(_rank_body, 2, tmp_path)
    single = SegmEpochMAP(num_classes=NUM_CLASSES)
    for batch in make_batches(3):
        single.update(*batch)
    expected = _scores(single)
    assert expected["segm_mAP50-95"] > 0.05
    for res in results:
        assert res["split"] == pytest.approx(expected, abs=0)
        assert res["one_sided"] == pytest.approx(expected, abs=0)
