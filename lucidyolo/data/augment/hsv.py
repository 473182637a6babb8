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
reduces to ``|d| <= 1`` plus a channel roll. Evaluated in float32 on row
chunks that stay in cache, this matches a float64 ``colorsys`` reference up to
the final rounding (tests pin <= 1 level).
"""

from __future__ import annotations

import numpy as np

CHUNK_PIXELS = 16384
"""Pixels per chunk: ~16 float32 planes of 64 KiB stay in L2; measured fastest of 8k/16k/32k."""


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


def apply_hsv(image: np.ndarray, gains: np.ndarray, chunk: int = CHUNK_PIXELS) -> np.ndarray:
    """Apply HSV gains to an RGB uint8 image.

    Args:
        image: ``(H, W, 3)`` uint8 RGB.
        gains: ``(3,)`` ``gh, gs, gv``.
        chunk: pixels processed per pass (a speed knob; the result does not depend on it).

    Returns:
        New ``(H, W, 3)`` uint8 RGB image (``image`` itself when all gains are 0).
    """
    if not np.any(gains):
        return image
    h, w = image.shape[:2]
    out = np.empty((h, w, 3), np.uint8)
    _hsv_into(image, out.transpose(2, 0, 1), gains, chunk)
    return out


def apply_hsv_chw(image: np.ndarray, gains: np.ndarray, flip: bool = False, chunk: int = CHUNK_PIXELS) -> np.ndarray:
    """HSV, optional left-right mirror and the HWC -> CHW transpose in one pass over the pixels.

    HSV is per pixel, so it commutes with the mirror; reading the mirrored
    input and writing each result plane straight into the CHW output saves the
    separate flip and transpose copies (and keeps the stores contiguous).
    Pixel values equal ``apply_hsv`` (then ``[:, ::-1]``),
    transposed.

    Args:
        image: ``(H, W, 3)`` uint8 RGB (any strides).
        gains: ``(3,)`` ``gh, gs, gv``; all zero = no colour change.
        flip: mirror left-right.
        chunk: pixels per pass (speed knob only).

    Returns:
        New contiguous ``(3, H, W)`` uint8 image.
    """
    h, w = image.shape[:2]
    out = np.empty((3, h, w), np.uint8)
    src = image[:, ::-1] if flip else image
    if np.any(gains):
        _hsv_into(src, out, gains, chunk)
    else:
        np.copyto(out, src.transpose(2, 0, 1))
    return out


def _hsv_into(image: np.ndarray, dst: np.ndarray, gains: np.ndarray, chunk: int) -> None:
    """Write the HSV-jittered ``(H, W, 3)`` uint8 ``image`` into the ``(3, H, W)`` uint8 view ``dst``.

    Works on blocks of whole rows (about ``chunk`` pixels) so every float32
    temporary stays in cache; ``image`` and ``dst`` may have any strides (HWC
    seen as CHW, CHW, mirrored input). Cheaper special cases, all exact:
    ``K`` is the constant ``(1 + gs)(1 + gv)`` when neither gain is positive
    (nothing clips); ``V'`` needs no cap when ``gv <= 0``; ``C'`` needs no cap
    when ``gs <= 0``; the hue term is skipped when ``d == 0``.
    """
    gh, gs, gv = (float(g) for g in gains)
    roll, d = hue_step(gh)
    h, w = image.shape[:2]
    if h * w == 0:
        return
    vscale = max(1.0 + gv, 0.0)
    sscale = max(1.0 + gs, 0.0)
    # 1e30 stands in for 1/0 (gs <= -1: grey) and still fits float32 after x255.
    inv_s = 1.0 / sscale if sscale > 1e-30 else 1e30
    # Guard for black pixels: a non-zero denominator of K below is M/(1+gs) >= inv_s or C >= 1.
    floor = 0.5 * min(1.0, inv_s)
    const_k = sscale <= 1.0 and vscale <= 1.0
    cols = [(c + roll) % 3 for c in range(3)]
    rows = max(1, int(chunk) // w)
    m = min(rows, h) * w
    planes = np.empty((3, m), np.float32)
    sgn = np.empty((3, m), np.float32)
    mx, mn, base, cprime, k2, hi, y = (np.empty(m, np.float32) for _ in range(7))
    # numpy's max/min against a scalar is ~4x slower than against an array: use constant planes
    top = np.full(m, 255.0, np.float32)
    guard = np.full(m, floor, np.float32)
    for r0 in range(0, h, rows):
        r1 = min(r0 + rows, h)
        ln = (r1 - r0) * w
        p = planes[:, :ln]
        np.copyto(p.reshape(3, r1 - r0, w), image[r0:r1].transpose(2, 0, 1), casting="unsafe")
        r, g, b = p
        a_mx, a_mn, a_base, a_c, a_k, a_hi, a_y = (x[:ln] for x in (mx, mn, base, cprime, k2, hi, y))
        np.maximum(r, g, out=a_mx)
        np.maximum(a_mx, b, out=a_mx)
        np.minimum(r, g, out=a_mn)
        np.minimum(a_mn, b, out=a_mn)
        np.add(r, g, out=a_base)
        a_base += b
        a_base -= a_mn  # M + mid
        np.subtract(a_mx, a_mn, out=a_c)  # C
        if const_k:
            # neither V nor S can clip, so K = C'/C = (1 + gs)(1 + gv) for every pixel
            kk = vscale * sscale
            np.multiply(a_mx, vscale, out=a_hi)
            a_c *= kk
            a_hi += 0.5  # round half up on the truncating cast
            a_base *= kk
            np.subtract(a_hi, a_base, out=a_base)
            np.subtract(a_hi, a_c, out=a_mn)
            kmul = 2.0 * kk
        else:
            np.multiply(a_mx, vscale, out=a_hi)
            if vscale > 1.0:
                np.minimum(a_hi, top[:ln], out=a_hi)  # V'
            # K = C'/C = V' / max(M / (1 + gs), C): saturation scaled, capped at S' = 1
            np.multiply(a_mx, inv_s, out=a_k)
            if sscale > 1.0:  # else M / (1 + gs) >= M >= C
                np.maximum(a_k, a_c, out=a_k)
            np.maximum(a_k, guard[:ln], out=a_k)
            np.divide(a_hi, a_k, out=a_k)
            a_c *= a_k  # C'
            a_hi += 0.5
            a_base *= a_k
            np.subtract(a_hi, a_base, out=a_base)  # V' + 0.5 - K (M + mid)
            np.subtract(a_hi, a_c, out=a_mn)  # lower bound V' - C' + 0.5
            a_k *= 2.0
            kmul = a_k
        if d != 0.0:
            a_c *= abs(d)  # hue step in levels; sigma_c below is pre-multiplied by sign(d)
            sr, sg_, sb = sgn[:, :ln]
            if d >= 0:
                np.subtract(g, b, out=sr)
                np.subtract(b, r, out=sg_)
                np.subtract(r, g, out=sb)
            else:
                np.subtract(b, g, out=sr)
                np.subtract(r, b, out=sg_)
                np.subtract(g, r, out=sb)
            s = sgn[:, :ln]
            # sigma_c = sign(next - prev) of integer differences; np.copysign/np.sign are not vectorised
            np.clip(s, -1.0, 1.0, out=s)
            s *= a_c
        for i, (col, ch) in enumerate(zip(cols, (r, g, b), strict=True)):  # 3 channels, not pixels
            np.multiply(ch, kmul, out=a_y)
            a_y += a_base
            if d != 0.0:
                a_y -= sgn[i, :ln]
            np.maximum(a_y, a_mn, out=a_y)
            np.minimum(a_y, a_hi, out=a_y)
            np.copyto(dst[col, r0:r1], a_y.reshape(r1 - r0, w), casting="unsafe")
