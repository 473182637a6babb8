"""Tiny hand-made image sources whose pixels and labels are known exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from lucidyolo.data.source import ImageSource, SourceBuilder
from lucidyolo.structures.targets import Polygons, Targets
from tests.task_fields import fields_of

RED = (250, 10, 10)


def rect_scene(h: int, w: int, box: tuple[int, int, int, int], colour=RED) -> np.ndarray:
    """Grey-ish (60) image with one solid rectangle covering pixels ``x0..x1-1, y0..y1-1``."""
    img = np.full((h, w, 3), 60, np.uint8)
    x0, y0, x1, y1 = box
    img[y0:y1, x0:x1] = colour
    return img


def rect_targets(box: tuple[int, int, int, int], task: str, label: int = 0) -> Targets:
    """Targets of one rectangle with every field of ``task`` filled consistently."""
    x0, y0, x1, y1 = (float(v) for v in box)
    ring = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32)
    kw: dict = {}
    if task == "seg":
        kw["polygons"] = Polygons.from_rings([ring], [0])
    if task == "obb":
        kw["rboxes"] = np.array([[(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0, 0.0]], np.float32)
        if x1 - x0 < y1 - y0:
            kw["rboxes"] = np.array([[(x0 + x1) / 2, (y0 + y1) / 2, y1 - y0, x1 - x0, np.pi / 2]], np.float32)
    if task == "pose":
        # keypoint 0 at the left third, keypoint 1 at the right third (a flip pair), 2 at the centre
        cy = (y0 + y1) / 2
        kw["keypoints"] = np.array([[[x0 + (x1 - x0) / 3, cy], [x0 + 2 * (x1 - x0) / 3, cy], [(x0 + x1) / 2, cy]]], np.float32)
        kw["visibility"] = np.full((1, 3), 2.0, np.float32)
    return Targets(np.array([[x0, y0, x1, y1]], np.float32), np.array([label]), np.zeros(1, bool), **kw)


def write_source(
    root: Path,
    task: str,
    scenes: list[tuple[np.ndarray, Targets]],
    flip_idx: list[int] | None = None,
    fmt: str = "png",
) -> ImageSource:
    """Write the images to ``root`` and build an :class:`ImageSource` over them."""
    root.mkdir(parents=True, exist_ok=True)
    meta = {"num_keypoints": 3, "flip_idx": flip_idx} if "keypoints" in fields_of(task) else {}
    builder = SourceBuilder(fields=fields_of(task), meta=meta)
    for i, (img, t) in enumerate(scenes):
        name = f"img{i}.{fmt}"
        Image.fromarray(img).save(root / name, quality=98) if fmt == "jpg" else Image.fromarray(img).save(root / name)
        builder.add(name, i, img.shape[:2], t)
    return builder.build(root=root, class_names=["a", "b"], category_ids=[0, 1])


def rect_source(root: Path, task: str, n: int = 4, seed: int = 0, flip_idx: list[int] | None = (1, 0, 2)) -> ImageSource:  # type: ignore[assignment]
    """``n`` images of varying aspect, each with one solid rectangle and exact labels."""
    rng = np.random.default_rng(seed)
    scenes = []
    for _ in range(n):
        h, w = int(rng.integers(48, 97)), int(rng.integers(48, 97))
        bw, bh = int(rng.integers(14, w // 2)), int(rng.integers(14, h // 2))
        x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
        box = (x0, y0, x0 + bw, y0 + bh)
        scenes.append((rect_scene(h, w, box), rect_targets(box, task)))
    return write_source(root, task, scenes, flip_idx=list(flip_idx) if (flip_idx is not None and task == "pose") else None)
