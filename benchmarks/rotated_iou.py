"""Exact rotated IoU matrix: ``rotated_iou_matrix`` (torch) against shapely 2.x vectorised, same boxes.

Random boxes with centres in a 1024 px image (``--extent``; smaller means
more overlapping pairs), sides 4-200 px, any angle. For each size,
times the torch matrix at 2 threads and at 1 thread, and shapely's
``intersection`` + ``area`` over the broadcast polygon arrays (single-threaded,
polygon construction untimed), best of ``--repeats``. Checks the largest IoU
difference. Prints ONE JSON line per size:
``{pairs, ours_s, ours_1thread_s, shapely_s, speedup, speedup_1thread, max_abs_diff}``
(``speedup = shapely_s / ours_s``).

Usage: python benchmarks/rotated_iou.py [--sizes 300 1000] [--repeats 3] [--extent 1024]
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import numpy as np
import shapely
import torch

from lucidyolo.structures.geometry import rbox_to_corners
from lucidyolo.structures.rotated_iou import rotated_iou_matrix


def _boxes(n: int, rng: np.random.Generator, extent: float) -> np.ndarray:
    xy = rng.uniform(0, extent, (n, 2))
    wh = rng.uniform(4, 200, (n, 2))
    theta = rng.uniform(-np.pi, np.pi, (n, 1))
    return np.concatenate([xy, wh, theta], 1).astype(np.float32)


def _best_s(fn, repeats: int) -> tuple[float, object]:
    out, best = None, float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extent", type=float, default=1024.0, help="centres in [0, extent)^2 px; smaller is denser")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for n in args.sizes:
        a, b = _boxes(n, rng, args.extent), _boxes(n, rng, args.extent)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        with torch.no_grad():
            rotated_iou_matrix(ta[:8], tb[:8])  # warm-up
            timings = {}
            for threads in (2, 1):
                torch.set_num_threads(threads)
                timings[threads], ours = _best_s(partial(rotated_iou_matrix, ta, tb), args.repeats)
        pa = shapely.polygons(rbox_to_corners(a).astype(np.float64))
        pb = shapely.polygons(rbox_to_corners(b).astype(np.float64))
        area_a, area_b = shapely.area(pa), shapely.area(pb)

        def shapely_iou(pa=pa, pb=pb, area_a=area_a, area_b=area_b) -> np.ndarray:
            inter = shapely.area(shapely.intersection(pa[:, None], pb[None, :]))
            return inter / (area_a[:, None] + area_b[None, :] - inter)

        shapely_s, ref = _best_s(shapely_iou, args.repeats)
        print(
            json.dumps(
                {
                    "pairs": n * n,
                    "extent": args.extent,
                    "ours_s": round(timings[2], 4),
                    "ours_1thread_s": round(timings[1], 4),
                    "shapely_s": round(shapely_s, 4),
                    "speedup": round(shapely_s / timings[2], 2),
                    "speedup_1thread": round(shapely_s / timings[1], 2),
                    "max_abs_diff": float(np.abs(ours.numpy() - ref).max()),
                    "overlapping_fraction": round(float((ref > 0).mean()), 4),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
