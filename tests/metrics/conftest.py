"""Shared fixtures for the metrics tests: a small COCO ground truth with crowds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def real_data_root() -> Path | None:
    """``../shared/data`` next to the repo, or ``LUCID_REAL_DATA``; None if absent."""
    env = os.environ.get("LUCID_REAL_DATA")
    root = Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    return root if root.is_dir() else None


def make_random_coco(seed: int, n_images: int = 12, n_cats: int = 4) -> dict[str, Any]:
    """COCO GT with boxes in all three area ranges, sparse category ids and crowd regions."""
    rng = np.random.default_rng(seed)
    cat_ids = [1, 3, 7, 18][:n_cats]  # non-contiguous on purpose, like COCO's
    images, anns = [], []
    for i in range(n_images):
        w, h = int(rng.integers(200, 640)), int(rng.integers(200, 640))
        images.append({"id": 1000 + i, "width": w, "height": h, "file_name": f"{i}.jpg"})
        for _ in range(int(rng.integers(0, 7))):
            bw = float(rng.uniform(8, w / 2))
            bh = float(rng.uniform(8, h / 2))
            x = float(rng.uniform(0, w - bw))
            y = float(rng.uniform(0, h - bh))
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": 1000 + i,
                    "category_id": int(rng.choice(cat_ids)),
                    "bbox": [x, y, bw, bh],
                    "area": bw * bh,
                    "iscrowd": int(rng.random() < 0.1),
                }
            )
    cats = [{"id": c, "name": f"class{c}"} for c in cat_ids]
    return {"images": images, "annotations": anns, "categories": cats}


def make_noisy_detections(gt: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """Jittered copies of the GT (some with wrong class) plus random false positives."""
    rng = np.random.default_rng(seed)
    cat_ids = [c["id"] for c in gt["categories"]]
    dets = []
    for a in gt["annotations"]:
        if rng.random() < 0.15:
            continue  # missed
        x, y, w, h = a["bbox"]
        j = rng.normal(0, 0.08, 4) * np.array([w, h, w, h])
        cat = a["category_id"] if rng.random() > 0.1 else int(rng.choice(cat_ids))
        dets.append(
            {
                "image_id": a["image_id"],
                "category_id": cat,
                "bbox": [x + j[0], y + j[1], max(w + j[2], 1.0), max(h + j[3], 1.0)],
                "score": float(rng.uniform(0.05, 1.0)),
            }
        )
    for img in gt["images"]:
        for _ in range(int(rng.integers(0, 4))):
            w, h = float(rng.uniform(5, 100)), float(rng.uniform(5, 100))
            dets.append(
                {
                    "image_id": img["id"],
                    "category_id": int(rng.choice(cat_ids)),
                    "bbox": [float(rng.uniform(0, img["width"] - w)), float(rng.uniform(0, img["height"] - h)), w, h],
                    "score": float(rng.uniform(0.01, 0.6)),
                }
            )
    return dets


@pytest.fixture
def random_coco() -> dict[str, Any]:
    return make_random_coco(seed=0)


@pytest.fixture
def coco_factory():
    """``make_random_coco`` (seeded COCO GT builder)."""
    return make_random_coco


@pytest.fixture
def dets_factory():
    """``make_noisy_detections`` (seeded detections for a GT)."""
    return make_noisy_detections


@pytest.fixture
def real_data() -> Path:
    """The shared real-data folder; skips when it is absent."""
    root = real_data_root()
    if root is None:
        pytest.skip("real data folder ../shared/data (or LUCID_REAL_DATA) is absent")
    return root
