"""The synthetic scene of the rotated-box field: four classes of rotated bars (a :class:`SyntheticScene`).

Each class keeps the shapes' hue and has its own aspect ratio (1.3-3.5), so
class and angle are both learnable; the long side is the placed diameter.
Labels are the four corners: YOLO rows ``x1 y1 ... x4 y4`` and COCO
``segmentation`` (clipped to the image), each annotation marked ``difficult: 0``
as DOTA-style sets carry the flag.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import ImageDraw

from lucidyolo.data.synth_scene import Drawn, SyntheticScene, ring_row
from lucidyolo.structures.geometry import canonicalize_rboxes, rbox_to_corners

CLASSES = ("red bar", "green bar", "blue bar", "yellow bar")
_ASPECT = [3.5, 2.2, 1.3, 2.8]


def _draw_bar(draw: ImageDraw.ImageDraw, rng: np.random.Generator, cx: float, cy: float, r: float, rot: float,
              label: int, colour: tuple[int, ...], size: int) -> Drawn:
    w = 2 * r
    h = w / _ASPECT[label]
    rb = canonicalize_rboxes(np.array([[cx, cy, w, h, rot]]))[0]
    ring = rbox_to_corners(rb[None])[0].astype(np.float64)
    draw.polygon([tuple(p) for p in ring], fill=colour)
    return Drawn(label, ring)


def _coco_keys(obj: Drawn, ring: np.ndarray) -> dict[str, Any]:
    return {"difficult": 0}


SCENE = SyntheticScene(names=CLASSES, draw=_draw_bar, yolo_row=ring_row, coco_keys=_coco_keys)
