"""Throughput of ``lucid eval`` on ``../shared/data/coco128_coco`` (128 COCO images), both decode paths; ONE JSON line.

Runs the engine's ``run_eval`` (what the command runs) on a nano checkpoint
trained for two batches on the same root (``benchmarks/_checkpoint.py``: throughput depends on the graph, not on
what it learned) at 640 px. One forward per batch serves both paths; the
timings split it into the forward, the decoding (top-k for e2e, NMS for nms),
the result conversion and pycocotools per path.

Usage: python benchmarks/eval.py [--data-root DIR] [--img-size 640] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._checkpoint import det_checkpoint

DEFAULT_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "coco128_coco"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--split", default="train")
    ap.add_argument("--img-size", type=int, default=640)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    import torch

    from lucidyolo.engine.evaluate import run_eval

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = det_checkpoint(Path(tmp), data_root=args.data_root)
        t0 = time.perf_counter()
        report = run_eval(ckpt, data_root=args.data_root, split=args.split, img_size=args.img_size,
                          batch_size=args.batch_size, device="cpu")
        wall = time.perf_counter() - t0
    t = report["timings"]
    n = report["num_images"]
    print(json.dumps({
        "benchmark": "eval", "images": n, "img_size": args.img_size, "batch_size": args.batch_size,
        "threads": torch.get_num_threads(), "wall_s": round(wall, 2), "img_per_s": round(n / wall, 2),
        "forward_s": round(t.get("forward_s", 0.0), 2), "decode_both_paths_s": round(t.get("decode_s", 0.0), 2),
        "predict_s": round(t.get("predict_s", 0.0), 2),
        "cocoeval_e2e_s": round(t.get("cocoeval_e2e_bbox_s", 0.0), 2),
        "cocoeval_nms_s": round(t.get("cocoeval_nms_bbox_s", 0.0), 2),
        "forward_img_per_s": round(n / max(t.get("forward_s", 0.0), 1e-9), 2),
        "e2e_AP": report["paths"]["e2e"]["bbox"]["stats"].get("AP"),
        "nms_AP": report["paths"]["nms"]["bbox"]["stats"].get("AP"),
    }))


if __name__ == "__main__":
    main()
