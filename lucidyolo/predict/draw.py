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
