"""A random but realistic COCO case: ground truth and results for all three IoU types.

Used where scoring itself is under test and no model is needed: the backend
parity tests (pycocotools is the oracle) and the scoring benchmark at COCO
scale (``benchmarks/eval.py --scoring-images 5000``). Several categories,
crowd regions (RLE), polygon masks, keypoints with unlabelled points, results
that are jittered ground truth plus false positives, misses, and tied scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

K = 5
"""Keypoints per instance."""
SIGMAS = [0.026, 0.025, 0.035, 0.079, 0.072]
"""OKS sigmas of the ``K`` points (pass as ``kpt_oks_sigmas``)."""


def _polygon(rng: np.random.Generator, x: float, y: float, w: float, h: float) -> list[float]:
    """A convex-ish ring of 6-10 points inside the box."""
    n = int(rng.integers(6, 11))
    t = np.sort(rng.uniform(0, 2 * np.pi, n))
    r = rng.uniform(0.6, 1.0, n)
    px = x + w / 2 + np.cos(t) * r * w / 2
    py = y + h / 2 + np.sin(t) * r * h / 2
    return np.stack([px, py], 1).reshape(-1).round(2).tolist()


def random_coco_case(
    seed: int, n_images: int = 40, max_instances: int = 6, max_false_positives: int = 3
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(ground truth dict, results)``; results carry ``bbox``, ``segmentation`` and ``keypoints``.

    Each image holds 0 to ``max_instances`` objects (about 8 % crowd regions,
    about 15 % of the rest missed) and 0 to ``max_false_positives`` spurious results.
    """
    rng = np.random.default_rng(seed)
    images, anns, dets = [], [], []
    cats = [{"id": c, "name": f"c{c}", "keypoints": [f"k{i}" for i in range(K)]} for c in (1, 3, 7)]
    for img_id in range(1, n_images + 1):
        w_img, h_img = int(rng.integers(120, 300)), int(rng.integers(100, 260))
        images.append({"id": img_id, "width": w_img, "height": h_img, "file_name": f"{img_id}.jpg"})
        for _ in range(int(rng.integers(0, max_instances + 1))):
            cat = int(rng.choice([1, 3, 7]))
            w, h = rng.uniform(4, w_img / 2), rng.uniform(4, h_img / 2)
            x, y = rng.uniform(0, w_img - w), rng.uniform(0, h_img - h)
            crowd = rng.random() < 0.08
            poly = _polygon(rng, x, y, w, h)
            if crowd:
                rle = mask_utils.merge(mask_utils.frPyObjects([poly], h_img, w_img))
                seg: Any = {"size": rle["size"], "counts": rle["counts"].decode()}
                area = float(mask_utils.area(rle))
            else:
                seg = [poly]
                area = float(mask_utils.area(mask_utils.merge(mask_utils.frPyObjects([poly], h_img, w_img))))
            kx, ky = rng.uniform(x, x + w, K), rng.uniform(y, y + h, K)
            kv = rng.choice([0, 1, 2], K, p=[0.2, 0.2, 0.6])
            kpts = np.stack([kx * (kv > 0), ky * (kv > 0), kv], 1).reshape(-1).round(2).tolist()
            ann = {"id": len(anns) + 1, "image_id": img_id, "category_id": cat, "bbox": [x, y, w, h], "area": area,
                   "iscrowd": int(crowd), "segmentation": seg, "keypoints": kpts, "num_keypoints": int((kv > 0).sum())}
            anns.append(ann)
            if crowd or rng.random() < 0.15:
                continue  # a miss
            j = rng.normal(0, 0.08, 4) * [w, h, w, h]
            box = [x + j[0], y + j[1], max(1.0, w + j[2]), max(1.0, h + j[3])]
            dpoly = (np.asarray(poly) + rng.normal(0, 0.05 * min(w, h), len(poly))).tolist()
            rle = mask_utils.merge(mask_utils.frPyObjects([dpoly], h_img, w_img))
            dk = np.stack([kx + rng.normal(0, 2, K), ky + rng.normal(0, 2, K), np.ones(K)], 1).reshape(-1).tolist()
            score = float(rng.choice([0.9, 0.5, rng.uniform(0.05, 1.0)]))  # ties on purpose
            dets.append({"image_id": img_id, "category_id": cat, "bbox": box, "score": score,
                         "segmentation": {"size": rle["size"], "counts": rle["counts"].decode()}, "keypoints": dk})
        for _ in range(int(rng.integers(0, max_false_positives + 1))):
            w, h = rng.uniform(4, w_img / 3), rng.uniform(4, h_img / 3)
            x, y = rng.uniform(0, w_img - w), rng.uniform(0, h_img - h)
            rle = mask_utils.merge(mask_utils.frPyObjects([_polygon(rng, x, y, w, h)], h_img, w_img))
            dk = np.stack([rng.uniform(x, x + w, K), rng.uniform(y, y + h, K), np.ones(K)], 1).reshape(-1).tolist()
            dets.append({"image_id": img_id, "category_id": int(rng.choice([1, 3, 7])), "bbox": [x, y, w, h],
                         "score": float(rng.uniform(0.01, 0.8)),
                         "segmentation": {"size": rle["size"], "counts": rle["counts"].decode()}, "keypoints": dk})
    return {"images": images, "annotations": anns, "categories": cats}, dets




def only_iou_type(results: list[dict[str, Any]], iou_type: str) -> list[dict[str, Any]]:
    """The results with the fields of the other IoU types removed (``loadRes`` keys on which are present)."""
    drop = {"bbox": ("segmentation", "keypoints"), "segm": ("keypoints",), "keypoints": ("segmentation",)}[iou_type]
    return [{k: v for k, v in d.items() if k not in drop} for d in results]
