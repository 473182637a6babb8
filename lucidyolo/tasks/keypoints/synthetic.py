"""The synthetic scene of the keypoint field: one class ``symbol``, a 7-point stick figure (a :class:`SyntheticScene`).

The points are head, hands, hips and feet, with left/right flip pairs
``(1, 2), (3, 4), (5, 6)``; each figure is tilted by up to +-0.35 rad. The head
dot is white and the limb dots dark, so every point is locatable while the
figure stays left/right symmetric. Every point is labelled visible (``v = 2``),
also where it leaves the image; the box is the dots' bounds clipped to the
image, and a COCO annotation's ``area`` is that box's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import ImageDraw

from lucidyolo.data.synth_scene import Drawn, SyntheticScene, box_row

CLASSES = ("symbol",)
KEYPOINT_NAMES = ("head", "left_hand", "right_hand", "left_hip", "right_hip", "left_foot", "right_foot")
FLIP_IDX = [0, 2, 1, 4, 3, 6, 5]
# Keypoint layout of the symbol in units of its half-height, y down.
_SYMBOL = np.array([[0.0, -1.0], [-0.8, -0.3], [0.8, -0.3], [-0.35, 0.25], [0.35, 0.25], [-0.5, 1.0], [0.5, 1.0]])
_LIMBS = [(0, 7), (1, 7), (2, 7), (3, 7), (4, 7), (3, 5), (4, 6)]  # 7 = body centre
_SKELETON = [[a + 1, b + 1] for a, b in ((0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6))]  # COCO: 1-based pairs


def _draw_symbol(draw: ImageDraw.ImageDraw, rng: np.random.Generator, cx: float, cy: float, r: float, rot: float,
                 label: int, colour: tuple[int, ...], size: int) -> Drawn:
    tilt = float(rng.uniform(-0.35, 0.35))
    c, s = np.cos(tilt), np.sin(tilt)
    local = np.vstack([_SYMBOL, [[0.0, -0.3]]]) * r  # 8th point: body centre (not a keypoint)
    pts = np.stack([cx + c * local[:, 0] - s * local[:, 1], cy + s * local[:, 0] + c * local[:, 1]], 1)
    width = max(2, int(r * 0.12))
    for a, b in _LIMBS:
        draw.line([tuple(pts[a]), tuple(pts[b])], fill=colour, width=width)
    dot = max(2.0, r * 0.1)
    for k, p in enumerate(pts[:7]):
        # Head white, limbs dark: keypoints are locatable, left/right symmetric.
        fill = (245, 245, 245) if k == 0 else (30, 30, 30)
        draw.ellipse([p[0] - dot, p[1] - dot, p[0] + dot, p[1] + dot], fill=fill)
    kp = pts[:7]
    lo, hi = kp.min(0) - dot, kp.max(0) + dot
    ring = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
    return Drawn(label, np.clip(ring, 0, size), points=kp)


def _visible(points: np.ndarray) -> np.ndarray:
    """``(K, 3)`` float64 ``x y v`` with every point visible."""
    return np.concatenate([points, np.full((len(points), 1), 2.0)], 1)


def _yolo_row(obj: Drawn, size: int) -> np.ndarray:
    assert obj.points is not None
    return np.concatenate([box_row(obj, size), _visible(obj.points / size).reshape(-1)])


def _coco_keys(obj: Drawn, ring: np.ndarray) -> dict[str, Any]:
    assert obj.points is not None
    w, h = ring.max(0) - ring.min(0)
    return {
        "keypoints": [round(float(v), 2) for v in _visible(obj.points).reshape(-1)],
        "num_keypoints": len(obj.points),
        "area": round(float(w * h), 2),
    }


SCENE = SyntheticScene(
    names=CLASSES,
    draw=_draw_symbol,
    yolo_row=_yolo_row,
    coco_keys=_coco_keys,
    category_keys={"keypoints": list(KEYPOINT_NAMES), "skeleton": _SKELETON},
    yaml_lines=(f"kpt_shape: [{len(KEYPOINT_NAMES)}, 3]", f"flip_idx: {FLIP_IDX}"),
)
