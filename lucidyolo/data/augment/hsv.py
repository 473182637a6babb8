"""Worker-side HSV colour jitter on uint8 images.

Gains ``(gh, gs, gv)`` are drawn uniformly in ``[-1, 1] * (h, s, v)``; hue is
shifted by ``gh`` (mod 1), saturation and value are multiplied by ``1 + g``
and clipped to ``[0, 1]``. The float twin for accelerators is
:mod:`lucidyolo.data.device_hsv`; both realise the same exact HSV transform and
differ only by the final rounding to 8 bits.

The transform is evaluated in closed form in RGB, without ever forming H, S, V
(Pillow's ``convert("HSV")`` alone cost more than the rest of a sample). Write
``M, m`` for a pixel's largest and smallest channel, ``C = M - m`` its chroma
and ``f_c = (M - c) / C`` how far channel ``c`` sits below the maximum (0 for the
maximum, 1 for the minimum). In HSV every channel is ``V - V S f_c(H)``, and a
hue step of ``d`` sextants (``d = 6 gh``, ``|d| <= 1``) changes the fractions to::

    f'_c = clamp(2 f_c - f_mid + sigma_c d, 0, 1),   f_mid = f_R + f_G + f_B - 1,
    sigma_c = sign(c_next - c_prev)                   (next/prev in R -> G -> B -> R)

(the mid channel moves by ``+-d``; the maximum/minimum only move once the
step crosses into the neighbouring sextant, which the clamp realises; ties get
``sigma = 0`` and land on the same values either way). Hence, with ``V' = min(M
(1 + gv), 255)`` and the new chroma ``C' = V' S' = min(C V'/M (1 + gs), V')``::

    c' = V' - clamp(K (M + mid - 2 c) + sigma_c d C', 0, C'),   K = C' / C.

Whole hue steps of 1/3 are a cyclic permutation of the channels, so any ``gh``
reduces to ``|d| <= 1`` plus a channel roll.

The per-pixel formula runs as one numba loop over planar ``(3, H, W)`` uint8
data (:mod:`lucidyolo.data.augment.hsv_kernel`), in float32 with IEEE
rounding of every operation, so the result does not depend on the CPU's
vector width. It matches a float64 ``colorsys`` reference up to the final rounding (tests pin
<= 1 level). On planar rows LLVM vectorises the loop: 0.3 ms for a 640 x 640
image against 3.1 ms for the same formula as numpy passes over cache-sized
chunks (docs/DECISIONS.md).
"""

from __future__ import annotations

import numpy as np


def draw_hsv_gains(rng: np.random.Generator, hgain: float, sgain: float, vgain: float) -> np.ndarray:
    """Three uniform draws in ``[-1, 1]`` scaled by the gains: ``(3,)`` float32 ``gh, gs, gv``."""
    return (rng.uniform(-1.0, 1.0, size=3) * np.array([hgain, sgain, vgain])).astype(np.float32)


def hue_step(gh: float) -> tuple[int, float]:
    """Split a hue shift into a channel roll and a residual step.

    Args:
        gh: hue shift in turns (any real; taken mod 1).

    Returns:
        ``(roll, d)``: rotate hue by ``roll`` thirds (output channel ``c`` comes
        from input channel ``c - roll``), then by ``d`` sextants, ``-1 <= d < 1``.
    """
    d6 = (float(gh) % 1.0) * 6.0
    k = int(np.floor(d6 / 2.0 + 0.5))
    return k % 3, d6 - 2.0 * k


def apply_hsv_chw(image: np.ndarray, gains: np.ndarray, flip: bool = False) -> np.ndarray:
    """HSV and an optional left-right mirror of a planar image, in one pass over the pixels.

    HSV is per pixel, so it commutes with the mirror: the kernel reads each row
    backwards instead of a separate flip copy.

    Args:
        image: ``(3, H, W)`` uint8 RGB planes (copied to contiguous rows if needed).
        gains: ``(3,)`` ``gh, gs, gv``; all zero = no colour change.
        flip: mirror left-right.

    Returns:
        New contiguous ``(3, H, W)`` uint8 image.
    """
    _, h, w = image.shape
    out = np.empty((3, h, w), np.uint8)
    if not np.any(gains):
        np.copyto(out, image[:, :, ::-1] if flip else image)
        return out
    if h * w == 0:
        return out
    from lucidyolo.data.augment.hsv_kernel import hsv_planes

    gh, gs, gv = (float(g) for g in gains)
    roll, d = hue_step(gh)
    vscale = max(1.0 + gv, 0.0)
    sscale = max(1.0 + gs, 0.0)
    # 1e30 stands in for 1/0 (gs <= -1: grey) and still fits float32 after x255.
    inv_s = 1.0 / sscale if sscale > 1e-30 else 1e30
    # Guard for black pixels: a non-zero denominator of K is M/(1+gs) >= inv_s or C >= 1.
    floor = 0.5 * min(1.0, inv_s)
    f32 = np.float32
    hsv_planes(
        np.ascontiguousarray(image),
        *(out[(c + roll) % 3] for c in range(3)),
        bool(flip),
        sscale <= 1.0 and vscale <= 1.0,
        f32(vscale * sscale),
        f32(vscale),
        f32(inv_s),
        f32(floor),
        f32(d),
    )
    return out


def apply_hsv(image: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """Apply HSV gains to an interleaved RGB image (the planar path, transposed both ways).

    Args:
        image: ``(H, W, 3)`` uint8 RGB (any strides).
        gains: ``(3,)`` ``gh, gs, gv``.

    Returns:
        New contiguous ``(H, W, 3)`` uint8 RGB image (``image`` itself when all gains are 0).
    """
    if not np.any(gains):
        return image
    return np.ascontiguousarray(apply_hsv_chw(image.transpose(2, 0, 1), gains).transpose(1, 2, 0))
