"""Worker-side HSV colour jitter on uint8 images.

Gains ``(gh, gs, gv)`` are drawn uniformly in ``[-1, 1] * (h, s, v)``; hue is
shifted by ``gh`` (mod 1), saturation and value are multiplied by ``1 + g``.
Pillow's C HSV conversion plus one 768-entry lookup table is the fastest
pure-CPU route we measured; hue is quantised to 1/255 as Pillow stores it.
The float twin for accelerators is :mod:`lucidyolo.data.device_hsv`.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

HUE_LEVELS = 255
"""Pillow stores hue as ``round-down(h * 255)``; 255 wraps to 0."""


def draw_hsv_gains(rng: np.random.Generator, hgain: float, sgain: float, vgain: float) -> np.ndarray:
    """Three uniform draws in ``[-1, 1]`` scaled by the gains: ``(3,)`` float32 ``gh, gs, gv``."""
    return (rng.uniform(-1.0, 1.0, size=3) * np.array([hgain, sgain, vgain])).astype(np.float32)


def hsv_lut(gains: np.ndarray) -> list[int]:
    """The per-band lookup table (H, S, V; 768 entries) realising ``gains``."""
    gh, gs, gv = (float(g) for g in gains)
    x = np.arange(256, dtype=np.float64)
    lut_h = np.mod(np.rint(x + gh * HUE_LEVELS), HUE_LEVELS)
    lut_s = np.clip(np.rint(x * (1.0 + gs)), 0, 255)
    lut_v = np.clip(np.rint(x * (1.0 + gv)), 0, 255)
    return np.concatenate([lut_h, lut_s, lut_v]).astype(np.int64).tolist()


def apply_hsv(image: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """Apply HSV gains to an RGB uint8 image.

    Args:
        image: ``(H, W, 3)`` uint8 RGB.
        gains: ``(3,)`` ``gh, gs, gv``.

    Returns:
        New ``(H, W, 3)`` uint8 RGB image.
    """
    if not np.any(gains):
        return image
    hsv = Image.fromarray(image).convert("HSV").point(hsv_lut(gains))
    return np.asarray(hsv.convert("RGB"))
