"""Throughput of ``lucid eval`` on ``../shared/data/coco128_coco`` (128 COCO images), both decode paths; ONE JSON line.

Runs the engine's ``run_eval`` (what the command runs) on a nano checkpoint
trained for two batches on the same root (``benchmarks/_checkpoint.py``: throughput depends on the graph, not on
what it learned) at 640 px. One forward per batch serves both paths; the
timings split it into the forward, the decoding (top-k for e2e, NMS for nms),
the result conversion and the COCO scoring per path (``--coco-backend``).

``--scoring-images N`` instead times the scoring step alone, for both
backends and all three IoU types, on a random COCO case of N images
(``tests.metrics.coco_random_case``; 5000 is COCO val's size): no model,
no images.

Usage: python benchmarks/eval.py [--data-root DIR] [--img-size 640] [--batch-size 32] [--coco-backend auto]
       python benchmarks/eval.py --scoring-images 5000
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
    ap.add_argument("--coco-backend", default="auto")
    ap.add_argument("--scoring-images", type=int, default=0, help="time the scoring step alone on N random images")
    args = ap.parse_args()
    if args.scoring_images:
        scoring(args.scoring_images)
        return
    import torch

    from lucidyolo.engine.commands.evaluate import run_eval

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = det_checkpoint(Path(tmp), data_root=args.data_root)
        t0 = time.perf_counter()
        report = run_eval(ckpt, data_root=args.data_root, split=args.split, img_size=args.img_size,
                          batch_size=args.batch_size, device="cpu", coco_backend=args.coco_backend)
        wall = time.perf_counter() - t0
    t = report["timings"]
    n = report["num_images"]
    print(json.dumps({
        "benchmark": "eval", "engine": report["engine"], "images": n, "img_size": args.img_size, "batch_size": args.batch_size,
        "threads": torch.get_num_threads(), "wall_s": round(wall, 2), "img_per_s": round(n / wall, 2),
        "forward_s": round(t.get("forward_s", 0.0), 2), "decode_both_paths_s": round(t.get("decode_s", 0.0), 2),
        "predict_s": round(t.get("predict_s", 0.0), 2),
        "cocoeval_e2e_s": round(t.get("cocoeval_e2e_bbox_s", 0.0), 2),
        "cocoeval_nms_s": round(t.get("cocoeval_nms_bbox_s", 0.0), 2),
        "forward_img_per_s": round(n / max(t.get("forward_s", 0.0), 1e-9), 2),
        "e2e_AP": report["paths"]["e2e"]["bbox"]["stats"].get("AP"),
        "nms_AP": report["paths"]["nms"]["bbox"]["stats"].get("AP"),
    }))


def scoring(n_images: int) -> None:
    """Seconds (and images/s) of ``evaluate_coco`` per backend and IoU type on one random case."""
    from lucidyolo.metrics.coco_backend import faster_available
    from lucidyolo.metrics.coco_eval import evaluate_coco
    from tests.metrics.coco_random_case import SIGMAS, only_iou_type, random_coco_case

    t0 = time.perf_counter()
    # COCO val's density: ~7 objects per image, and a young model's results reach maxDets (100) per image
    gt, results = random_coco_case(0, n_images, max_instances=14, max_false_positives=180)
    out: dict = {"benchmark": "eval_scoring", "images": n_images, "annotations": len(gt["annotations"]),
                 "results": len(results), "generate_s": round(time.perf_counter() - t0, 2)}
    backends = ["pycocotools"] + (["faster_coco_eval"] if faster_available() else [])
    for iou_type in ("bbox", "segm", "keypoints"):
        dets = only_iou_type(results, iou_type)
        sigmas = SIGMAS if iou_type == "keypoints" else None
        aps = {}
        for backend in backends:
            res = evaluate_coco(gt, dets, iou_type=iou_type, kpt_oks_sigmas=sigmas, backend=backend)
            total = res.timings["total"]
            out[f"{iou_type}_{backend}_s"] = round(total, 2)
            out[f"{iou_type}_{backend}_img_per_s"] = round(n_images / total, 1)
            aps[backend] = res.stats["AP"]
        if len(aps) == 2:
            out[f"{iou_type}_speedup"] = round(out[f"{iou_type}_pycocotools_s"] / out[f"{iou_type}_faster_coco_eval_s"], 2)
            out[f"{iou_type}_max_AP_difference"] = abs(aps["pycocotools"] - aps["faster_coco_eval"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
