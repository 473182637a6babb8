"""Draw detections on an image (``lucid predict --save``); the colour is a function of the class index."""

from __future__ import annotations

import colorsys
import math
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw


def class_colour(label: int) -> tuple[int, int, int]:
    """A stable, well-spread colour per class index (golden-ratio hue steps)."""
    h = (label * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(h, 0.85, 0.95)
    return int(r * 255), int(g * 255), int(b * 255)


def caption(name: str, score: float) -> str:
    """"name score", or the name alone for a label (a target row's score is NaN: it has none)."""
    return name if math.isnan(score) else f"{name} {score:.2f}"


def draw_boxes(image: np.ndarray, boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray,
               names: Sequence[str]) -> Image.Image:
    """Boxes ``(N, 4)`` xyxy in image pixels with "name score" captions on an ``(H, W, 3)`` uint8 image."""
    out = Image.fromarray(image)
    draw = ImageDraw.Draw(out)
    width = max(1, round(max(image.shape[:2]) / 320))
    for box, score, label in zip(boxes.tolist(), scores.tolist(), labels.tolist(), strict=True):
        colour = class_colour(int(label))
        draw.rectangle(box, outline=colour, width=width)
        name = names[int(label)] if 0 <= int(label) < len(names) else str(int(label))
        text = caption(name, score)
        x, y = box[0], max(0.0, box[1] - 11)
        tw = draw.textlength(text)
        draw.rectangle((x, y, x + tw + 4, y + 11), fill=colour)
        draw.text((x + 2, y), text, fill=(0, 0, 0))
    return out


MASK_ALPHA = 0.45
"""Opacity of a filled mask: the image stays readable under overlapping instances."""


def draw_masks(image: np.ndarray, predictions: Sequence[dict], names: Sequence[str]) -> Image.Image:
    """Translucent filled masks (COCO RLE ``"mask"`` of each prediction) with outlines, then boxes and captions.

    Masks are blended lowest score first, so the most confident instance is on top.
    """
    from pycocotools import mask as mask_utils

    canvas = image.astype(np.float32)
    edges = np.zeros(image.shape[:2], dtype=np.int64) - 1  # class index of the outline at each pixel
    for p in sorted(predictions, key=lambda p: p["score"]):
        m = mask_utils.decode(p["mask"]).astype(bool)  # (H, W)
        if not m.any():
            continue
        colour = np.asarray(class_colour(int(p["label"])), np.float32)
        canvas[m] = canvas[m] * (1.0 - MASK_ALPHA) + colour * MASK_ALPHA
        # outline: mask pixels with a 4-neighbour outside the mask
        inner = m.copy()
        inner[1:, :] &= m[:-1, :]
        inner[:-1, :] &= m[1:, :]
        inner[:, 1:] &= m[:, :-1]
        inner[:, :-1] &= m[:, 1:]
        edges[m & ~inner] = int(p["label"])
    for label in np.unique(edges[edges >= 0]):
        canvas[edges == label] = class_colour(int(label))
    blended = canvas.round().clip(0, 255).astype(np.uint8)
    boxes = np.array([p["box"] for p in predictions], dtype=np.float64).reshape(-1, 4)
    scores = np.array([p["score"] for p in predictions], dtype=np.float64)
    labels = np.array([p["label"] for p in predictions], dtype=np.int64)
    return draw_boxes(blended, boxes, scores, labels, names)


SIDE_COLOURS = {"left": (40, 120, 255), "right": (255, 140, 30), "centre": (255, 255, 255)}
"""Point colours by body side: a viewer reads a skeleton's orientation (and a left/right swap) at a glance."""

COCO_PERSON_SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7), (6, 8), (7, 9), (8, 10),
    (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip
"""The limbs of COCO's 17-point person schema (``skeleton`` of its person category, 0-based)."""


def keypoint_sides(k: int, flip_idx: Sequence[int] | None) -> list[str]:
    """``left``, ``right`` or ``centre`` per point from the flip permutation.

    A point its own mirror is ``centre``; of a mirrored pair the lower index is
    ``left`` (COCO lists ``left_*`` before ``right_*``, as do the synthetic
    symbols). Without ``flip_idx`` every point is ``centre``.
    """
    if flip_idx is None or len(flip_idx) != k:
        return ["centre"] * k
    return ["centre" if j == i else ("left" if i < j else "right") for i, j in enumerate(flip_idx)]


def draw_keypoints(image: np.ndarray, points: np.ndarray, flip_idx: Sequence[int] | None = None,
                   threshold: float = 0.5, skeleton: Sequence[Sequence[int]] | None = None) -> Image.Image:
    """Skeletons on an ``(H, W, 3)`` uint8 image: ``points (N, K, 3)`` ``[x, y, confidence]`` in image pixels.

    Points below ``threshold`` are not drawn, nor are limbs touching them. The
    limbs are ``skeleton`` (0-based point pairs) when the data declares one,
    else those of the 17-point COCO person schema for 17 points, else none.
    """
    out = Image.fromarray(image)
    draw = ImageDraw.Draw(out)
    n, k = points.shape[:2] if points.ndim == 3 else (0, 0)
    sides = keypoint_sides(k, flip_idx)
    radius = max(2, round(max(image.shape[:2]) / 200))
    limbs = [(int(a), int(b)) for a, b in skeleton if max(a, b) < k] if skeleton is not None else (
        COCO_PERSON_SKELETON if k == 17 else ())
    for inst in points.reshape(n, k, 3):
        shown = inst[:, 2] >= threshold
        for a, b in limbs:
            if shown[a] and shown[b]:
                draw.line([tuple(inst[a, :2]), tuple(inst[b, :2])], fill=SIDE_COLOURS[sides[b]], width=radius)
        for (x, y, _), side, on in zip(inst.tolist(), sides, shown.tolist(), strict=True):
            if on:
                draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=SIDE_COLOURS[side],
                             outline=(0, 0, 0))
    return out


def draw_rotated(image: np.ndarray, polygons: np.ndarray, scores: np.ndarray, labels: np.ndarray,
                 names: Sequence[str]) -> Image.Image:
    """Rotated boxes as their quadrilaterals ``(N, 4, 2)`` in image pixels, never their upright envelopes.

    The "name score" caption sits at the corner highest on screen.
    """
    out = Image.fromarray(image)
    draw = ImageDraw.Draw(out)
    width = max(1, round(max(image.shape[:2]) / 320))
    for quad, score, label in zip(polygons.tolist(), scores.tolist(), labels.tolist(), strict=True):
        colour = class_colour(int(label))
        draw.line([*map(tuple, quad), tuple(quad[0])], fill=colour, width=width)
        name = names[int(label)] if 0 <= int(label) < len(names) else str(int(label))
        text = caption(name, score)
        x, y = min(quad, key=lambda p: p[1])
        y = max(0.0, y - 11)
        tw = draw.textlength(text)
        draw.rectangle((x, y, x + tw + 4, y + 11), fill=colour)
        draw.text((x + 2, y), text, fill=(0, 0, 0))
    return out
