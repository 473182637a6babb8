"""What the curves and confusion matrices cost a fit: prints ONE JSON line.

Trains ``TASK``'s embedded default run (``lucid fit TASK`` with no data and no
config: for det 20 epochs of nano on 240 synthetic images at 320 px) in this
process through :class:`lucidyolo.Model`, with timers around every piece the
curves add, and reports:

- ``wall_s``: the whole fit;
- ``matches_s``: reading the metric's matches every epoch (the pycocotools
  ``evalImgs`` walk, or the extra IoU-0.5 pycocotools pass with faster-coco-eval,
  and the cross-class overlaps);
- ``precision_recall_s``: the ``results.csv`` precision / recall every epoch;
- ``best_epoch_s``: keeping the best epoch's matches (the hook call);
- ``draw_s``: the PNGs, JSON and TensorBoard images at the end;
- ``overhead_s`` (their sum) and ``overhead_pct`` of ``wall_s``.

Usage: ``python benchmarks/curves.py [--task det] [--epochs 20] [--extra key=value ...]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any


def _timed(store: dict[str, float], key: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            store[key] += time.perf_counter() - t

    return wrapper


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="det")
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="override trainer.max_epochs (default: the recipe's)",
    )
    p.add_argument(
        "--extra", nargs="*", default=[], help="dotted overrides, e.g. data.synthetic_images=80"
    )
    args = p.parse_args(argv)

    import lucidyolo.engine.run.best_curves as best_curves
    import lucidyolo.metrics.coco_eval as coco_eval
    import lucidyolo.metrics.epoch_map as epoch_map
    import lucidyolo.tasks.keypoints.epoch_map as oks_epoch_map
    import lucidyolo.tasks.obb.epoch_map as rotated_epoch_map
    import lucidyolo.tasks.segment.epoch_map as segm_epoch_map
    from lucidyolo import Model

    spent: dict[str, float] = defaultdict(float)
    coco_eval._matches = _timed(spent, "matches_s", coco_eval._matches)
    rotated_epoch_map.rotated_matches = _timed(
        spent, "matches_s", rotated_epoch_map.rotated_matches
    )
    pr = _timed(spent, "precision_recall_s", epoch_map.precision_recall)
    for module in (epoch_map, segm_epoch_map, oks_epoch_map, rotated_epoch_map):
        module.precision_recall = pr  # type: ignore[attr-defined]
    best_curves.BestCurves.on_validation_end = _timed(
        spent, "best_epoch_s", best_curves.BestCurves.on_validation_end
    )
    best_curves.BestCurves.on_fit_end = _timed(spent, "draw_s", best_curves.BestCurves.on_fit_end)

    overrides: dict[str, Any] = dict(kv.split("=", 1) for kv in args.extra)
    if args.epochs is not None:
        overrides["trainer.max_epochs"] = args.epochs
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("LUCIDYOLO_CACHE_DIR", os.path.join(tmp, "cache"))
        overrides["trainer.default_root_dir"] = os.path.join(tmp, "runs")
        t = time.perf_counter()
        result = Model.new(args.task).fit(**overrides)
        wall = time.perf_counter() - t
        drawn = sorted(f.name for f in result.run_dir.glob("*_curves.json"))
    keys = ("matches_s", "precision_recall_s", "best_epoch_s", "draw_s")
    overhead = sum(spent[k] for k in keys)
    out = {
        "benchmark": "curves", "task": args.task, "overrides": {k: str(v) for k, v in overrides.items()
                                                                 if k != "trainer.default_root_dir"},
        "wall_s": round(wall, 2), **{k: round(spent[k], 3) for k in keys},
        "overhead_s": round(overhead, 3), "overhead_pct": round(100 * overhead / wall, 2), "curve_sets": drawn,
    }  # fmt: skip
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
