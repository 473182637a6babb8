"""Training-loader throughput at 640 px with mosaic; prints ONE JSON line.

Measured side by side in one run (CPU numbers are only meaningful as ratios):
- ``images_per_s``: the training DataLoader alone for 0, 1 and 2 workers;
- ``tensors_per_batch``: shm segments one packed batch costs;
- ``peak_rss_mb``: this process and its (reaped) workers;
- ``sample_over_decode`` (a): with 0 workers, time per training sample divided
  by the time spent decoding the images that sample reads (mosaic reads 4),
  both timed inside the same samples (target <= 1.5);
- ``loader_over_model`` (b): 2-worker loader images/s divided by the n model's
  training images/s at 640 (forward + backward + SGD step; target >= 3);
- ``bytes_per_batch``: mean and max over the 0-worker batches of the packed
  tensors' bytes (:meth:`PackedBatch.nbytes`), with
  ``polygon_bytes_per_batch`` (the ragged ``poly_*`` tensors: ``(P, 2)``
  float32 + 2 x ``(R,)`` int64) and ``dense_mask_bytes_per_batch``: what one
  ``(S, S)`` uint8 mask per instance would cost for the same batches instead
  (the transport the rings replace); ``dense_over_polygon_batch`` is the
  whole batch with dense masks over the batch as packed.

Usage: ``python benchmarks/loader.py [--data-root DIR] [--task seg] [--batch 8] [--batches 4]``.
``--task`` reads and packs that task's fields (resolved through the task
registry, as the engine does); without it boxes only. Without real data it
writes the synthetic shapes set (of those fields) to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import torch

from lucidyolo.data.datasets import TrainDataset
from lucidyolo.data.loader import build_train_loader
from lucidyolo.structures.packed import PackedBatch

IMG_SIZE = 640


def _source(data_root: str | None, fields: tuple[str, ...]):
    from lucidyolo.data.layouts import open_source

    default = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "coco128_coco"
    root = Path(data_root) if data_root else default
    if root.is_dir():
        return open_source(root, "train", fields), str(root)
    from lucidyolo.data.synth import write_synthetic

    out = write_synthetic(Path(tempfile.mkdtemp()) / "synth", fields, 64, img_size=IMG_SIZE, seed=0)
    return open_source(out, "train", fields), "synthetic"


def _batch_bytes(batch: PackedBatch) -> dict[str, int]:
    """Bytes of one packed batch, its polygon share, and dense ``(S, S)`` uint8 masks for its N instances."""
    s = int(batch.images.shape[-1])
    poly = {k: t for k, t in batch.fields.items() if k.startswith("poly_")}
    return {
        "total": batch.nbytes(),
        "polygons": sum(t.numel() * t.element_size() for t in poly.values()),
        "dense_masks": int(batch.labels.shape[0]) * s * s,
        "instances": int(batch.labels.shape[0]),
        "rings": int(poly["poly_ring_lengths"].shape[0]) if poly else 0,
        "ring_points": int(poly["poly_points"].shape[0]) if poly else 0,
    }


def _loader_rate(source, fields: tuple[str, ...], workers: int, batch: int, batches: int) -> tuple[float, int, list[dict[str, int]]]:
    ds = TrainDataset(source, IMG_SIZE, "n", seed=0)
    loader = build_train_loader(ds, batch, fields, num_workers=workers, seed=0)
    it = iter(loader)
    first = next(it)  # worker start-up and warm-up excluded
    sizes = [_batch_bytes(first)]
    t0 = time.perf_counter()
    n = 0
    for _ in range(batches):
        b = next(it)
        n += len(b)
        sizes.append(_batch_bytes(b))  # a few sums over tensor shapes: no time worth excluding
    dt = time.perf_counter() - t0
    del it
    return n / dt, first.num_tensors, sizes


def _sample_over_decode(source, samples: int) -> float:
    ds = TrainDataset(source, IMG_SIZE, "n", seed=0)
    decode = ds._decode
    spent = [0.0]

    def timed(i: int):
        t = time.perf_counter()
        out = decode(i)
        spent[0] += time.perf_counter() - t
        return out

    ds._decode = timed  # type: ignore[method-assign]
    ds[(0, 0)]
    spent[0] = 0.0
    t0 = time.perf_counter()
    for i in range(samples):
        ds[(0, i % len(ds))]
    total = time.perf_counter() - t0
    return total / spent[0]


def _model_rate(batch: int, steps: int) -> float | None:
    try:
        from lucidyolo.models import create_model
    except ImportError:
        return None
    model = create_model("n")
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, 3, IMG_SIZE, IMG_SIZE)

    def step():
        out = model(x)
        # proxy objective touching both branches (the loss itself is benchmarked elsewhere)
        loss = sum(v.float().mean() for br in ("o2m", "o2o") for v in out[br].values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return batch * steps / (time.perf_counter() - t0)


def _bytes_summary(sizes: list[dict[str, int]]) -> dict[str, object]:
    """Mean and max per batch of each byte/count column of :func:`_batch_bytes`."""
    def stat(key: str) -> dict[str, float]:
        v = [s[key] for s in sizes]
        return {"mean": round(sum(v) / len(v), 1), "max": max(v)}

    total = sum(s["total"] for s in sizes)
    return {
        "bytes_per_batch": stat("total"),
        "polygon_bytes_per_batch": stat("polygons"),
        "polygon_share_of_batch": round(sum(s["polygons"] for s in sizes) / total, 5),
        "dense_mask_bytes_per_batch": stat("dense_masks"),
        # What the batch would weigh if dense masks replaced the rings.
        "dense_over_polygon_batch": round(
            sum(s["total"] - s["polygons"] + s["dense_masks"] for s in sizes) / total, 2),
        "instances_per_batch": stat("instances"),
        "rings_per_batch": stat("rings"),
        "ring_points_per_batch": stat("ring_points"),
        "batches_measured": len(sizes),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", default=None)
    p.add_argument("--task", default=None, help="read and pack this task's fields (e.g. seg); default: boxes only")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--model-steps", type=int, default=2)
    a = p.parse_args()
    fields: tuple[str, ...] = ()
    if a.task:
        from lucidyolo.tasks.registry import get_task

        fields = tuple(get_task(a.task).fields)
    source, origin = _source(a.data_root, fields)
    need = a.batch * (a.batches + 1)  # one warm-up batch, then the timed ones, all from epoch 0
    if len(source) < need:
        p.error(f"{origin} has {len(source)} training images; --batch {a.batch} x (--batches {a.batches} + 1) needs {need}")
    rates, tensors, sizes = {}, set(), []
    for w in (0, 1, 2):
        r, k, sz = _loader_rate(source, fields, w, a.batch, a.batches)
        rates[str(w)] = round(r, 2)
        tensors.add(k)
        if w == 0:  # every worker count yields the same batches (position-seeded samples)
            sizes = sz
    ratio_a = _sample_over_decode(source, 4 * a.batch)
    model_rate = _model_rate(a.batch, a.model_steps)
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        json.dumps(
            {
                "benchmark": "loader",
                "source": origin,
                "task": a.task,
                "fields": list(fields),
                "img_size": IMG_SIZE,
                "batch": a.batch,
                "torch_threads": torch.get_num_threads(),
                "images_per_s": rates,
                "tensors_per_batch": sorted(tensors),
                **_bytes_summary(sizes),
                "peak_rss_mb": {"main": round(self_kb / 1024, 1), "worker_max": round(child_kb / 1024, 1)},
                "sample_over_decode": round(ratio_a, 3),
                "sample_over_decode_target": 1.5,
                "model_train_images_per_s": None if model_rate is None else round(model_rate, 3),
                "loader_over_model": None if model_rate is None else round(rates["2"] / model_rate, 2),
                "loader_over_model_target": 3.0,
            }
        )
    )


if __name__ == "__main__":
    main()
