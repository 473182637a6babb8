"""The compiled per-pixel loop of the HSV jitter (numba), on planar uint8 rows.

Imported lazily by :mod:`lucidyolo.data.augment.hsv` so that evaluation and
prediction never load numba. Compiled on first call and cached on disk
(``cache=True``: numba's cache next to this file, or its user-wide fallback),
so a loader worker pays the compile once per machine, not once per process.
Where numba finds no writable place for its cache (a read-only install and no
writable home, as in some containers) it would refuse the module at import; the
loop is then compiled in each process instead (~0.3 s), never refused.

Every operation rounds as IEEE float32 (no contraction, reassociation or
reciprocal approximation); only ``nnan``/``ninf``/``nsz`` are granted, which lets
LLVM turn the float ``min``/``max`` into vector instructions. The result is
therefore the same on every CPU, vector width or not, and the same as the
formula evaluated op by op in numpy float32.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = {"fastmath": {"nnan", "ninf", "nsz"}, "boundscheck": False, "error_model": "numpy"}


def _njit_cached(fn):
    """``numba.njit`` with the on-disk cache where numba can write one, else without it."""
    try:
        return numba.njit(cache=True, **_JIT)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(**_JIT)(fn)


@numba.njit(inline="always", **_JIT)  # inlined into the loop below, which carries the cache
def _pixel(r, g, b, const_k, kk, vscale, inv_s, floor, dh):  # pragma: no cover - compiled
    """float32 ``r, g, b`` in levels -> the three new channels before truncation (see hsv.py)."""
    one = np.float32(1.0)
    mx = max(max(r, g), b)
    mn = min(min(r, g), b)
    base = r + g + b - mn  # M + mid
    c = mx - mn
    hi = min(mx * vscale, np.float32(255.0))  # V'
    # K = C'/C: when neither V nor S can clip it is (1 + gs)(1 + gv) for every pixel, else
    # V' / max(M / (1 + gs), C) (saturation scaled, capped at S' = 1; the floor guards black)
    k = kk if const_k else hi / max(max(mx * inv_s, c), floor)
    cp = c * k  # C'
    hi = hi + np.float32(0.5)  # round half up on the truncating cast
    b2 = hi - base * k
    lo = hi - cp
    km = k * np.float32(2.0)
    dc = cp * dh  # hue step in levels, signed
    yr = min(max(r * km + b2 - min(max(g - b, -one), one) * dc, lo), hi)
    yg = min(max(g * km + b2 - min(max(b - r, -one), one) * dc, lo), hi)
    yb = min(max(b * km + b2 - min(max(r - g, -one), one) * dc, lo), hi)
    return yr, yg, yb


def _hsv_planes(src, out_r, out_g, out_b, flip, const_k, kk, vscale, inv_s, floor, dh):  # pragma: no cover - compiled
    """Write the jittered image's planes.

    Args:
        src: ``(3, H, W)`` uint8, rows contiguous.
        out_r, out_g, out_b: ``(H, W)`` uint8 planes receiving the new R, G, B
            (the caller passes them rolled for whole hue thirds).
        flip: mirror left-right on the way (reads each row backwards).
        const_k, kk, vscale, inv_s, floor, dh: float32 constants of the
            closed form (:func:`lucidyolo.data.augment.hsv.apply_hsv_chw`).
    """
    h, w = src.shape[1], src.shape[2]
    for y in range(h):
        rr, gg, bb = src[0, y], src[1, y], src[2, y]
        o_r, o_g, o_b = out_r[y], out_g[y], out_b[y]
        # two loops, not a per-pixel select of the read index: the select stops the vectoriser (9x slower)
        if flip:
            for x in range(w):
                xs = w - 1 - x  # backward reads vectorise (0.8 ms at 640 x 640); backward writes do not (2.7 ms)
                yr, yg, yb = _pixel(np.float32(rr[xs]), np.float32(gg[xs]), np.float32(bb[xs]), const_k, kk, vscale, inv_s, floor, dh)
                o_r[x], o_g[x], o_b[x] = np.uint8(yr), np.uint8(yg), np.uint8(yb)
        else:
            for x in range(w):
                yr, yg, yb = _pixel(np.float32(rr[x]), np.float32(gg[x]), np.float32(bb[x]), const_k, kk, vscale, inv_s, floor, dh)
                o_r[x], o_g[x], o_b[x] = np.uint8(yr), np.uint8(yg), np.uint8(yb)


hsv_planes = _njit_cached(_hsv_planes)
