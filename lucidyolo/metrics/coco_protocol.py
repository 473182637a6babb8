"""The reusable COCO evaluation protocol: one forward per batch, every decode path, pycocotools per IoU type.

A task plugs in through two functions: ``decode(outputs=, path=)`` (its own
hook) and ``to_results(decoded_row, image_id, category_ids, letterbox,
orig_hw)`` turning one image's decoded rows into COCO results dicts, and names
the decode ``paths`` to score (its ``TaskSpec.decode_paths``, which the engine
passes to the ``evaluate`` hook). Box tasks score ``bbox``; a mask task adds
``segm``, a keypoint task ``keypoints``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from lucidyolo.data.source import ImageSource
from lucidyolo.data.val_batches import val_batches


def predict_split(
    model: Any, decode: Callable[..., Any], to_results: Callable[..., list[dict[str, Any]]], source: ImageSource,
    fields: Sequence[str], img_size: int, batch_size: int, device: Any, limit: int | None, *, paths: Sequence[str],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, float]]:
    """Run ``model`` over a split; COCO results (original pixels, dataset ids) per decode path of ``paths``.

    Returns:
        ``({path: [...] for each of paths, in order}, {"forward_s", "decode_s"})``.
    """
    import torch

    from lucidyolo.data.worker_plan import plan_eval_workers

    workers = plan_eval_workers(source, tuple(fields), batch_size, img_size)  # the /dev/shm budget fit uses
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
    t_forward = t_decode = 0.0
    model.to(device)
    with torch.inference_mode():
        for images, _, meta in val_batches(source, img_size, batch_size, fields, device, limit=limit, workers=workers):
            t0 = time.perf_counter()
            outputs = model(images)
            t1 = time.perf_counter()
            decoded = {path: decode(outputs=outputs, path=path).cpu() for path in paths}
            t_forward += t1 - t0
            t_decode += time.perf_counter() - t1
            for i in range(images.shape[0]):  # per image: only the result dicts, after the batched decode
                index = int(meta["index"][i])
                letterbox = tuple(float(v) for v in meta["letterbox"][i])
                hw = (int(meta["orig_hw"][i, 0]), int(meta["orig_hw"][i, 1]))
                for path, rows in decoded.items():
                    results[path] += to_results(rows[i], source.image_id(index), source.category_ids, letterbox, hw)
    return results, {"forward_s": t_forward, "decode_s": t_decode}


def evaluate_coco_protocol(
    *, model: Any, decode: Callable[..., Any], to_results: Callable[..., list[dict[str, Any]]], source: ImageSource,
    fields: Sequence[str], iou_types: Sequence[str], img_size: int, batch_size: int, device: Any, limit: int | None,
    paths: Sequence[str], matches: bool = False,
) -> dict[str, Any]:
    """Predict a split and score each decode path of ``paths`` with pycocotools for each of ``iou_types``.

    ``matches``: also return what pycocotools matched at IoU 0.5 (``"matches": {path: {iou_type: Matches}}``).

    Returns:
        ``{"paths": {path: {iou_type: stats dict}}, "timings": {...}, "results": {path: [...]},
        "num_images": int}`` (the shape the ``evaluate`` hook returns), plus ``matches`` when asked.
    """
    from lucidyolo.data.coco_gt import build_coco_gt
    from lucidyolo.metrics.coco_eval import evaluate_coco

    t0 = time.perf_counter()
    results, timings = predict_split(model, decode, to_results, source, fields, img_size, batch_size, device, limit,
                                     paths=paths)
    timings["predict_s"] = time.perf_counter() - t0
    gt = build_coco_gt(source)
    if limit is not None:
        keep = {source.image_id(i) for i in range(min(limit, len(source)))}
        gt = {**gt, "images": [im for im in gt["images"] if im["id"] in keep],
              "annotations": [a for a in gt["annotations"] if a["image_id"] in keep]}
    scored: dict[str, Any] = {}
    found: dict[str, Any] = {}
    for path, dets in results.items():
        scored[path], found[path] = {}, {}
        for iou_type in iou_types:
            res = evaluate_coco(gt, dets, iou_type=iou_type, matches=matches)
            scored[path][iou_type] = res.to_dict()
            if res.matches is not None:
                found[path][iou_type] = res.matches
            timings[f"cocoeval_{path}_{iou_type}_s"] = res.timings.get("total", 0.0)
    out = {"paths": scored, "timings": timings, "results": results, "num_images": len(gt["images"])}
    return {**out, "matches": found} if matches else out
