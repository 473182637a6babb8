"""Training-loader throughput at 640 px with mosaic; prints ONE JSON line.

Measured side by side in one run (CPU numbers are only meaningful as ratios):
- ``images_per_s``: the training DataLoader alone for 0, 1 and 2 workers;
- ``tensors_per_batch``: shm segments one packed batch costs;
- ``peak_rss_mb``: this process and its (reaped) workers;
- ``sample_over_decode`` (a): with 0 workers, time per training sample divided
  by the time spent decoding the images that sample reads (mosaic reads 4),
  both timed inside the same samples (target <= 1.5);
- ``loader_over_model`` (b): 2-worker loader images/s divided by the n model's
  training images/s at 640 (forward + backward + SGD step; target >= 3).

Usage: ``python benchmarks/loader.py [--data-root DIR] [--batch 8] [--batches 4]``.
Without real data it writes the synthetic shapes set to a temporary folder.
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


def _source(data_root: str | None):
    from lucidyolo.data.layouts import open_source

    default = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "coco128_coco"
    root = Path(data_root) if data_root else default
    if root.is_dir():
        return open_source(root, "train", ()), str(root)
    from lucidyolo.data.synth import write_synthetic

    out = write_synthetic(Path(tempfile.mkdtemp()) / "synth", (), 64, img_size=640, seed=0)
    return open_source(out, "train", ()), "synthetic"


def _loader_rate(source, workers: int, batch: int, batches: int) -> tuple[float, int]:
    ds = TrainDataset(source, 640, "n", seed=0)
    loader = build_train_loader(ds, batch, num_workers=workers, seed=0)
    it = iter(loader)
    first = next(it)  # worker start-up and warm-up excluded
    t0 = time.perf_counter()
    n = 0
    for _ in range(batches):
        n += len(next(it))
    dt = time.perf_counter() - t0
    del it
    return n / dt, first.num_tensors


def _sample_over_decode(source, samples: int) -> float:
    ds = TrainDataset(source, 640, "n", seed=0)
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
    x = torch.rand(batch, 3, 640, 640)

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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", default=None)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--model-steps", type=int, default=2)
    a = p.parse_args()
    source, origin = _source(a.data_root)
    rates, tensors = {}, set()
    for w in (0, 1, 2):
        r, k = _loader_rate(source, w, a.batch, a.batches)
        rates[str(w)] = round(r, 2)
        tensors.add(k)
    ratio_a = _sample_over_decode(source, 4 * a.batch)
    model_rate = _model_rate(a.batch, a.model_steps)
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        json.dumps(
            {
                "benchmark": "loader",
                "source": origin,
                "img_size": 640,
                "batch": a.batch,
                "torch_threads": torch.get_num_threads(),
                "images_per_s": rates,
                "tensors_per_batch": sorted(tensors),
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
