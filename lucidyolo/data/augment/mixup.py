"""Mixup: blend two augmented samples, keep the labels of both."""

from __future__ import annotations

import numpy as np

from lucidyolo.structures.targets import Targets

BETA_ALPHA = 32.0
"""lambda ~ Beta(32, 32): blends stay close to 50/50."""


def draw_mixup_lambda(rng: np.random.Generator) -> float:
    """One Beta(32, 32) draw."""
    return float(rng.beta(BETA_ALPHA, BETA_ALPHA))


def mixup(
    image_a: np.ndarray,
    targets_a: Targets,
    image_b: np.ndarray,
    targets_b: Targets,
    lam: float,
    keep_float: bool = False,
) -> tuple[np.ndarray, Targets]:
    """``lam * a + (1 - lam) * b`` and the union of both instance sets.

    Args:
        image_a, image_b: ``(3, S, S)`` images of one shape (uint8 or float32).
        lam: weight of ``a``.
        keep_float: return float32 (device-HSV transport keeps the blend
            unrounded until the colour transform); otherwise round to uint8.

    Returns:
        Blended ``(3, S, S)`` image and ``concat([targets_a, targets_b])``.
    """
    blend = image_a.astype(np.float32) * lam + image_b.astype(np.float32) * (1.0 - lam)
    image = blend if keep_float else np.clip(np.rint(blend), 0, 255).astype(np.uint8)
    return image, Targets.concat([targets_a, targets_b])
