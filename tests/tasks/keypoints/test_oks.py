"""OKS pieces against pycocotools: oks_matrix, keypoint results, the epoch metric, evaluate_coco's sigmas."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval, Params

from lucidyolo.metrics.coco_eval import dets_to_coco_results, evaluate_coco
from lucidyolo.tasks.keypoints.epoch_map import OKSEpochMAP
from lucidyolo.tasks.keypoints.keypoint_detections import KeypointDetections
from lucidyolo.tasks.keypoints.oks import (
    COCO_PERSON_SIGMAS,
    UNIFORM_SIGMA,
    keypoint_sigmas,
    oks_matrix,
)
from lucidyolo.tasks.keypoints.results import keypoint_results

# ----------------------------------------------------------------- helpers


def _coco(gt: dict[str, Any]) -> COCO:
    coco = COCO()
    coco.dataset = gt
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def _pycoco_eval(gt: dict[str, Any], dets: list[dict[str, Any]], sigmas: list[float]) -> COCOeval:
    """Plain pycocotools keypoint evaluation (the independent golden)."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = _coco(gt)
        coco_dt = coco_gt.loadRes([dict(d) for d in dets])
        e = COCOeval(coco_gt, coco_dt, iouType="keypoints")
        e.params.kpt_oks_sigmas = np.asarray(sigmas, np.float64)
        e.evaluate()
        e.accumulate()
        e.summarize()
    return e


def _random_case(rng: np.random.Generator, n: int, m: int, k: int) -> dict[str, np.ndarray]:
    """GT boxes (xyxy), points with some invisible ones (one GT fully invisible), noisy predictions."""
    xy0 = rng.uniform(0, 300, (m, 2))
    wh = rng.uniform(20, 150, (m, 2))
    boxes = np.concatenate([xy0, xy0 + wh], 1)  # (m, 4)
    gt = xy0[:, None] + rng.uniform(0, 1, (m, k, 2)) * wh[:, None]  # (m, k, 2)
    vis = rng.choice([0.0, 1.0, 2.0], size=(m, k), p=[0.3, 0.3, 0.4])
    vis[0] = 0.0  # a GT with no visible point: pycocotools' grown-box rule
    if m > 1:
        vis[1] = 2.0
    areas = wh.prod(1) * rng.uniform(0.4, 1.0, m)  # like a segmentation area, below the box area
    src = rng.integers(0, m, n)
    pred = gt[src] + rng.normal(0, 8, (n, k, 2))  # near some GT
    pred[: n // 3] = rng.uniform(-200, 600, (n // 3, k, 2))  # some far away, also outside grown boxes
    return {"boxes": boxes, "gt": gt, "vis": vis, "areas": areas, "pred": pred}


def _golden_oks(case: dict[str, np.ndarray], sigmas: list[float]) -> np.ndarray:
    n, k = case["pred"].shape[:2]
    m = case["gt"].shape[0]
    boxes = case["boxes"]
    gt = {
        "images": [{"id": 1}],
        "categories": [{"id": 1, "name": "thing"}],
        "annotations": [
            {
                "id": j + 1, "image_id": 1, "category_id": 1,
                "bbox": [boxes[j, 0], boxes[j, 1], boxes[j, 2] - boxes[j, 0], boxes[j, 3] - boxes[j, 1]],
                "area": float(case["areas"][j]), "iscrowd": 0,
                "keypoints": np.concatenate([case["gt"][j], case["vis"][j, :, None]], 1).reshape(-1).tolist(),
                "num_keypoints": int((case["vis"][j] > 0).sum()),
            }
            for j in range(m)
        ],
    }  # fmt: skip
    dets = [  # strictly decreasing scores: computeOks' score sort keeps the row order
        {"image_id": 1, "category_id": 1, "score": 1.0 - i / (2 * n),
         "keypoints": np.concatenate([case["pred"][i], np.ones((k, 1))], 1).reshape(-1).tolist()}
        for i in range(n)
    ]  # fmt: skip
    e = _pycoco_eval(gt, dets, sigmas)
    return np.asarray(e.computeOks(1, 1))


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(a, dtype=torch.float64)


# ----------------------------------------------------------------- sigmas / oks_matrix


def test_sigmas() -> None:
    np.testing.assert_allclose(COCO_PERSON_SIGMAS, Params(iouType="keypoints").kpt_oks_sigmas, rtol=0, atol=1e-15)
    assert keypoint_sigmas(17) == list(COCO_PERSON_SIGMAS)
    assert keypoint_sigmas(7) == [UNIFORM_SIGMA] * 7 and UNIFORM_SIGMA == 0.072
    with pytest.raises(ValueError):
        keypoint_sigmas(0)


@pytest.mark.parametrize(("seed", "k"), [(0, 17), (1, 17), (2, 7), (3, 7), (4, 1)])
def test_oks_matrix_matches_pycocotools(seed: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    case = _random_case(rng, n=12, m=5, k=k)
    sigmas = keypoint_sigmas(k)
    want = _golden_oks(case, sigmas)
    got = oks_matrix(_t(case["pred"]), _t(case["gt"]), _t(case["vis"]), _t(case["areas"]), sigmas,
                     gt_boxes=_t(case["boxes"]))
    assert got.shape == (12, 5) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-12)
    assert got[:, 0].max() > 0.0  # the fully-invisible GT is measured, not skipped


def test_oks_matrix_without_boxes_zeroes_blind_gt() -> None:
    rng = np.random.default_rng(5)
    case = _random_case(rng, n=6, m=3, k=7)
    sigmas = keypoint_sigmas(7)
    got = oks_matrix(_t(case["pred"]), _t(case["gt"]), _t(case["vis"]), _t(case["areas"]), sigmas)
    want = _golden_oks(case, sigmas)
    assert torch.all(got[:, 0] == 0)
    np.testing.assert_allclose(got[:, 1:].numpy(), want[:, 1:], rtol=0, atol=1e-12)


def test_oks_matrix_hand_case_and_edges() -> None:
    gt = torch.tensor([[[10.0, 10.0], [20.0, 10.0]]])  # (1, 2, 2)
    vis = torch.tensor([[2.0, 0.0]])  # only point 0 counts
    pred = torch.tensor([[[13.0, 14.0], [500.0, 500.0]]])  # point 0 at distance 5
    area, sigma = 100.0, 0.1
    got = oks_matrix(pred, gt, vis, torch.tensor([area]), [sigma, sigma])
    want = np.exp(-25.0 / ((2 * sigma) ** 2 * 2 * (area + np.spacing(1))))
    assert got.shape == (1, 1) and abs(float(got) - want) < 1e-6
    assert oks_matrix(pred, gt, vis, torch.tensor([area]), [sigma, sigma]).dtype == torch.float32
    assert oks_matrix(pred[:0], gt, vis, torch.tensor([area]), [sigma] * 2).shape == (0, 1)
    assert oks_matrix(pred, gt[:0], vis[:0], torch.zeros(0), [sigma] * 2).shape == (1, 0)
    with pytest.raises(ValueError, match="sigmas"):
        oks_matrix(pred, gt, vis, torch.tensor([area]), [sigma] * 3)


# ----------------------------------------------------------------- keypoint_results


def test_keypoint_results_letterbox_inverse() -> None:
    rows = torch.tensor([
        [20.0, 30.0, 110.0, 70.0, 0.9, 1.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # padding
        [5.0, 5.0, 250.0, 90.0, 0.4, 0.0],
    ])  # fmt: skip
    kps = torch.zeros(3, 2, 3)
    kps[0] = torch.tensor([[60.0, 45.0, 0.8], [10.0, 20.0, 0.5]])
    kps[2] = torch.tensor([[5.0, 500.0, 0.3], [410.0, 10.0, 0.2]])  # outside the image: clipped
    scale, pad_x, pad_y, hw = 0.5, 10.0, 20.0, (100, 200)
    out = keypoint_results(KeypointDetections(rows, kps), 7, [3, 9], (scale, pad_x, pad_y), hw)
    boxes_only = dets_to_coco_results(rows, 7, [3, 9], scale, pad_x, pad_y, hw)
    assert [{k: v for k, v in d.items() if k != "keypoints"} for d in out] == boxes_only
    assert [d["category_id"] for d in out] == [9, 3]
    # (60 - 10) / 0.5 = 100, (45 - 20) / 0.5 = 50; (10, 20) maps to the image corner (0, 0)
    assert out[0]["keypoints"] == pytest.approx([100.0, 50.0, 0.8, 0.0, 0.0, 0.5])
    # (5, 500) -> (-10, 960) -> clipped (0, 100); (410, 10) -> (800, -20) -> (200, 0)
    assert out[1]["keypoints"] == pytest.approx([0.0, 100.0, 0.3, 200.0, 0.0, 0.2])
    assert all(type(v) is float for d in out for v in d["keypoints"])
    # forward letterbox of the mapped points is the network point again (unclipped one)
    assert out[0]["keypoints"][0] * scale + pad_x == 60.0 and out[0]["keypoints"][1] * scale + pad_y == 45.0
    empty = keypoint_results(KeypointDetections(torch.zeros(0, 6), torch.zeros(0, 2, 3)), 7, [3, 9])
    assert empty == []


# ----------------------------------------------------------------- OKSEpochMAP


def _pose_batch(k: int = 5) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Two images in the network frame: image 0 with two persons, image 1 with one plus padding."""
    boxes = torch.tensor([
        [[10.0, 10.0, 110.0, 210.0], [200.0, 50.0, 260.0, 170.0]],
        [[40.0, 40.0, 140.0, 120.0], [0.0, 0.0, 0.0, 0.0]],
    ])  # fmt: skip
    mask = torch.tensor([[True, True], [True, False]])
    g = torch.Generator().manual_seed(0)
    frac = torch.rand(2, 2, k, 2, generator=g)
    lo, wh = boxes[..., None, :2], (boxes[..., 2:] - boxes[..., :2])[..., None, :]
    points = lo + frac * wh  # (2, 2, K, 2)
    vis = torch.full((2, 2, k), 2.0)
    vis[0, 1, 0] = 0.0  # one hidden point
    gt = {"boxes": boxes, "labels": torch.zeros(2, 2, dtype=torch.long), "mask": mask,
          "keypoints": points, "visibility": vis * mask[..., None]}
    meta = {"index": torch.tensor([4, 9])}
    return gt, meta


def _decoded_from_gt(gt: dict[str, torch.Tensor], shift: float, n: int = 6) -> KeypointDetections:
    """Predictions = GT (points shifted by ``shift`` px in x), then padding rows."""
    b, m, k = gt["keypoints"].shape[:3]
    rows = torch.zeros(b, n, 6)
    kps = torch.zeros(b, n, k, 3)
    rows[:, :m, :4] = gt["boxes"]
    rows[:, :m, 4] = torch.where(gt["mask"], torch.tensor([0.9, 0.8])[:m], torch.tensor(0.0))
    kps[:, :m, :, :2] = gt["keypoints"] + torch.tensor([shift, 0.0])
    kps[:, :m, :, 2] = 0.7 * gt["mask"][..., None]
    return KeypointDetections(rows, kps)


def test_oks_epoch_map_perfect_is_one() -> None:
    gt, meta = _pose_batch()
    metric = OKSEpochMAP(num_keypoints=5)
    metric.update(_decoded_from_gt(gt, 0.0), gt, meta)
    out = metric.compute()
    assert set(out) == {"oks_mAP", "oks_precision", "oks_recall"}
    assert {k: float(v) for k, v in out.items()} == pytest.approx({"oks_mAP": 1.0, "oks_precision": 1.0, "oks_recall": 1.0})
    assert metric.last_result is not None and metric.last_result.num_detections == 3  # padding rows dropped
    metric.reset()
    assert float(metric.compute()["oks_mAP"]) == 0.0 and metric.last_result is None  # empty epoch


def test_oks_epoch_map_scores_an_image_without_instances() -> None:
    """A person-free image (a false positive on it, nothing to match) is scored, not a crash: AP 0 by hand."""
    k = 17
    rows = torch.zeros(1, 300, 6)
    rows[0, 0] = torch.tensor([10.0, 10.0, 50.0, 50.0, 0.9, 0.0])
    gt = {"boxes": torch.zeros(1, 1, 4), "labels": torch.zeros(1, 1, dtype=torch.long),
          "mask": torch.zeros(1, 1, dtype=torch.bool), "keypoints": torch.zeros(1, 1, k, 2),
          "visibility": torch.zeros(1, 1, k)}
    metric = OKSEpochMAP(k, num_classes=1)
    metric.update(KeypointDetections(rows, torch.zeros(1, 300, k, 3)), gt, {"index": torch.tensor([0])})
    assert float(metric.compute()["oks_mAP"]) == 0.0  # no ground truth anywhere: COCOeval's -1, reported as 0


def _hand_coco(gt: dict[str, torch.Tensor], decoded: KeypointDetections) -> tuple[dict[str, Any], list[dict]]:
    """The COCO dicts written out by hand: box area, visible count, padding skipped."""
    images, anns, dets = [], [], []
    for i, image_id in enumerate([4, 9]):
        images.append({"id": image_id})
        for j in range(gt["boxes"].shape[1]):
            if not gt["mask"][i, j]:
                continue
            x1, y1, x2, y2 = gt["boxes"][i, j].tolist()
            kp = torch.cat([gt["keypoints"][i, j], gt["visibility"][i, j, :, None]], 1).double()
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": 0,
                         "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1), "iscrowd": 0,
                         "keypoints": kp.reshape(-1).tolist(),
                         "num_keypoints": int((gt["visibility"][i, j] > 0).sum())})
        for r in range(decoded.rows.shape[1]):
            if decoded.rows[i, r, 4] > 0:
                dets.append({"image_id": image_id, "category_id": 0, "score": float(decoded.rows[i, r, 4]),
                             "keypoints": decoded.keypoints[i, r].double().reshape(-1).tolist()})
    return {"images": images, "annotations": anns, "categories": [{"id": 0, "name": "person"}]}, dets


@pytest.mark.parametrize("shift", [3.0, 9.0, 20.0])
def test_oks_epoch_map_shift_matches_pycocotools(shift: float) -> None:
    gt, meta = _pose_batch()
    decoded = _decoded_from_gt(gt, shift)
    # a low-score stray row in image 1 (a false positive) and a zero-visible GT there
    decoded.rows[1, 2] = torch.tensor([150.0, 10.0, 190.0, 90.0, 0.3, 0.0])
    decoded.keypoints[1, 2, :, :2] = torch.tensor([170.0, 50.0])
    gt["mask"][1, 1] = True
    gt["boxes"][1, 1] = torch.tensor([160.0, 20.0, 180.0, 80.0])
    sigmas = keypoint_sigmas(5)
    metric = OKSEpochMAP(num_keypoints=5)
    metric.update(decoded, gt, meta)
    got = float(metric.compute()["oks_mAP"])
    hand_gt, hand_dets = _hand_coco(gt, decoded)
    want = _pycoco_eval(hand_gt, hand_dets, sigmas).stats[0]
    assert got == pytest.approx(want, abs=1e-6)
    assert got == 1.0 if shift < 5 else 0.0 < got < 1.0  # 3 px keeps every OKS above .95


def test_oks_epoch_map_single_instance_closed_form() -> None:
    # one fully visible GT, its prediction shifted: OKS = exp(-d^2 / (8 sigma^2 A)) for every point,
    # and AP = the fraction of thresholds in .50:.05:.95 that OKS reaches
    k, area, sigma = 4, 100.0 * 100.0, UNIFORM_SIGMA
    target = 0.62  # AP = 3/10 (thresholds .50, .55, .60)
    d = float(np.sqrt(-np.log(target) * 8 * sigma**2 * area))
    boxes = torch.tensor([[[0.0, 0.0, 100.0, 100.0]]])
    pts = torch.tensor([[[[10.0, 10.0], [90.0, 10.0], [50.0, 50.0], [20.0, 80.0]]]])
    gt = {"boxes": boxes, "labels": torch.zeros(1, 1, dtype=torch.long), "mask": torch.ones(1, 1, dtype=torch.bool),
          "keypoints": pts, "visibility": torch.ones(1, 1, k)}
    rows = torch.tensor([[[0.0, 0.0, 100.0, 100.0, 0.9, 0.0], [0.0] * 6]])
    kps = torch.zeros(1, 2, k, 3)
    kps[0, 0, :, :2] = pts[0, 0] + torch.tensor([0.0, d])
    metric = OKSEpochMAP(num_keypoints=k)
    metric.update(KeypointDetections(rows, kps.double()), gt, {"index": torch.tensor([0])})
    assert float(metric.compute()["oks_mAP"]) == pytest.approx(0.3, abs=1e-7)


def test_oks_epoch_map_clips_to_letterbox_and_dedupes() -> None:
    gt, meta = _pose_batch()
    decoded = _decoded_from_gt(gt, 0.0)
    # the image occupies x in [0, 300], y in [0, 250] of the input: a point beyond it is clipped back
    meta = {**meta, "letterbox": torch.tensor([[1.0, 0.0, 0.0]] * 2, dtype=torch.float64),
            "orig_hw": torch.tensor([[250, 300]] * 2)}
    decoded.keypoints[0, 0, 0, 0] = 1000.0
    gt["keypoints"][0, 0, 0, 0] = 300.0
    metric = OKSEpochMAP(num_keypoints=5)
    metric.update(decoded, gt, meta)
    metric.update(_decoded_from_gt(gt, 50.0), gt, meta)  # same indices again: ignored
    assert float(metric.compute()["oks_mAP"]) == pytest.approx(1.0, abs=1e-12)
    _, results = metric.to_coco()
    assert results[0]["keypoints"][0] == 300.0


def test_oks_epoch_map_rejects_wrong_k() -> None:
    gt, meta = _pose_batch(k=5)
    with pytest.raises(ValueError, match="num_keypoints=7"):
        OKSEpochMAP(num_keypoints=7).update(_decoded_from_gt(gt, 0.0), gt, meta)
    with pytest.raises(ValueError, match="sigmas"):
        OKSEpochMAP(num_keypoints=5, sigmas=[0.1] * 4)


# ----------------------------------------------------------------- evaluate_coco sigmas


def _k7_coco(shift: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rng = np.random.default_rng(11)
    images, anns, dets = [], [], []
    for i in range(3):
        images.append({"id": i + 1, "height": 400, "width": 400})
        for _ in range(2):
            x, y = rng.uniform(0, 200, 2)
            pts = np.stack([x + rng.uniform(0, 150, 7), y + rng.uniform(0, 150, 7), np.full(7, 2.0)], 1)
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": 1, "bbox": [x, y, 150.0, 150.0],
                         "area": 150.0 * 150.0, "iscrowd": 0, "keypoints": pts.reshape(-1).tolist(),
                         "num_keypoints": 7})
            det = pts.copy()
            det[:, 0] += shift
            dets.append({"image_id": i + 1, "category_id": 1, "score": float(rng.uniform(0.5, 1)),
                         "bbox": [x, y, 150.0, 150.0], "keypoints": det.reshape(-1).tolist()})
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "thing"}]}, dets


def test_evaluate_coco_keypoints_custom_sigmas() -> None:
    gt, dets = _k7_coco(0.0)
    assert evaluate_coco(gt, dets, "keypoints", kpt_oks_sigmas=keypoint_sigmas(7)).stats["AP"] == pytest.approx(1.0)
    gt, dets = _k7_coco(12.0)
    sig = keypoint_sigmas(7)
    got = evaluate_coco(gt, dets, "keypoints", kpt_oks_sigmas=np.asarray(sig))
    np.testing.assert_allclose(got.stats_array(), _pycoco_eval(gt, dets, sig).stats, rtol=0, atol=1e-12)
    assert len(got.stats) == 10


def test_evaluate_coco_keypoints_sigma_errors() -> None:
    gt, dets = _k7_coco(0.0)
    with pytest.raises(ValueError, match="has 17 values but the keypoints have K=7"):
        evaluate_coco(gt, dets, "keypoints", kpt_oks_sigmas=COCO_PERSON_SIGMAS)
    with pytest.raises(ValueError, match="K=7 keypoints but no kpt_oks_sigmas"):
        evaluate_coco(gt, dets, "keypoints")
    with pytest.raises(ValueError, match="only applies to iou_type='keypoints'"):
        evaluate_coco(gt, dets, "bbox", kpt_oks_sigmas=keypoint_sigmas(7))
    with pytest.raises(ValueError, match="positive"):
        evaluate_coco(gt, dets, "keypoints", kpt_oks_sigmas=[0.0] * 7)
    mixed = [dict(dets[0], keypoints=dets[0]["keypoints"][:-3]), *dets[1:]]
    with pytest.raises(ValueError, match="different numbers of points"):
        evaluate_coco(gt, mixed, "keypoints", kpt_oks_sigmas=keypoint_sigmas(7))
    # no detections: the ground truth's K is still checked, and an empty result scores 0
    assert evaluate_coco(gt, [], "keypoints", kpt_oks_sigmas=keypoint_sigmas(7)).stats["AP"] == 0.0


def test_evaluate_coco_keypoints_default_sigmas_are_cocos() -> None:
    rng = np.random.default_rng(3)
    case = _random_case(rng, n=4, m=3, k=17)
    b = case["boxes"]
    gt = {"images": [{"id": 1}], "categories": [{"id": 1, "name": "person"}], "annotations": [
        {"id": j + 1, "image_id": 1, "category_id": 1, "bbox": [b[j, 0], b[j, 1], b[j, 2] - b[j, 0], b[j, 3] - b[j, 1]],
         "area": float(case["areas"][j]), "iscrowd": 0,
         "keypoints": np.concatenate([case["gt"][j], case["vis"][j, :, None]], 1).reshape(-1).tolist(),
         "num_keypoints": int((case["vis"][j] > 0).sum())} for j in range(3)]}  # fmt: skip
    dets = [{"image_id": 1, "category_id": 1, "score": 0.9 - 0.1 * i,
             "keypoints": np.concatenate([case["pred"][i], np.ones((17, 1))], 1).reshape(-1).tolist()}
            for i in range(4)]  # fmt: skip
    a = evaluate_coco(gt, dets, "keypoints").stats_array()
    b2 = evaluate_coco(gt, dets, "keypoints", kpt_oks_sigmas=COCO_PERSON_SIGMAS).stats_array()
    np.testing.assert_array_equal(a, b2)
