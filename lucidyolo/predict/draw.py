"""Draw detections on an image (``lucid predict --save``); the colour is a function of the class index."""

from __future__ import annotations

import colorsys
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw


def class_colour(label: int) -> tuple[int, int, int]:
    """A stable, well-spread colour per class index (golden-ratio hue steps)."""
    h = (label * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(h, 0.85, 0.95)
    return int(r * 255), int(g * 255), int(b * 255)


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
        caption = f"{name} {score:.2f}"
        x, y = box[0], max(0.0, box[1] - 11)
        tw = draw.textlength(caption)
        draw.rectangle((x, y, x + tw + 4, y + 11), fill=colour)
        draw.text((x + 2, y), caption, fill=(0, 0, 0))
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
