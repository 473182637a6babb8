"""A synthetic class-folder set: one shape per class on a noisy background (tests, the embedded default run)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ("circle", "square", "triangle", "cross")
_COLOURS = ((220, 60, 50), (60, 170, 70), (50, 90, 220), (230, 200, 40))
_MARKER = ".lucidyolo-cls-synthetic.json"


def _draw(kind: int, size: int, rng: np.random.Generator) -> Image.Image:
    noise = rng.normal(110, 25, (size, size, 3)).clip(0, 255).astype(np.uint8)
    img = Image.fromarray(noise)
    d = ImageDraw.Draw(img)
    r = size * rng.uniform(0.18, 0.32)
    cx, cy = (rng.uniform(r, size - r) for _ in range(2))
    colour = tuple(int(c) for c in np.clip(np.array(_COLOURS[kind]) + rng.normal(0, 15, 3), 0, 255))
    if kind == 0:
        d.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    elif kind == 1:
        d.rectangle((cx - r, cy - r, cx + r, cy + r), fill=colour)
    elif kind == 2:
        d.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    else:
        w = r / 3
        d.rectangle((cx - r, cy - w, cx + r, cy + w), fill=colour)
        d.rectangle((cx - w, cy - r, cx + w, cy + r), fill=colour)
    return img


def write_class_folders(out_dir: Path, num_images: int, img_size: int, seed: int, val_fraction: float = 0.25) -> Path:
    """Write ``out_dir/{train,val}/<class>/*.jpg`` (reused when the same parameters wrote it before)."""
    out = Path(out_dir)
    params = {"num_images": num_images, "img_size": img_size, "seed": seed, "val_fraction": val_fraction, "version": 1}
    marker = out / _MARKER
    if marker.is_file() and json.loads(marker.read_text()) == params:
        return out
    n_val = max(len(CLASSES), int(round(num_images * val_fraction)))
    for i in range(num_images):
        rng = np.random.default_rng([seed, i])
        kind = i % len(CLASSES)
        split = "val" if i < n_val else "train"
        folder = out / split / CLASSES[kind]
        folder.mkdir(parents=True, exist_ok=True)
        _draw(kind, img_size, rng).save(folder / f"{i:05d}.jpg", quality=92)
    marker.write_text(json.dumps(params))
    return out


def make_synthetic(out_dir: Path, num_images: int, img_size: int, seed: int, **_: object) -> Path:
    """The ``make_synthetic`` hook."""
    return write_class_folders(out_dir, max(num_images, 2 * len(CLASSES)), img_size, seed)
