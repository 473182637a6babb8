"""Forward-only latency of the deployed graph (BN folded) against the same model unfolded.

Two baselines: the identical graph (trunk + o2o + top-k) with BatchNorm unfolded,
which isolates folding, and the whole eval-mode model (both branches), which is
what a user runs without the deploy view.

Both run in eval mode under ``torch.inference_mode`` after warm-up, interleaved in
one process so the ratio is fair on a shared machine. Prints ONE JSON line.

Interleaving three models also makes each evict the others' weights and
activations from the caches, which a user running one model never sees; the
latency target (b1 x 640, channels-last, folded) is therefore also measured
alone, as a user runs it: ``b1x640_cl_folded_alone_ms`` is the median of
``--alone-repeats`` consecutive forwards of the deployed graph after warm-up.

``--predict DIR`` adds what ``lucid predict`` costs per JPEG end to end after
warm-up (read, letterbox, the predict path's model view, decode, the task's
result dicts), timed between consecutive images of the folder by the engine's
own ``run_predict`` on a one-epoch checkpoint (``benchmarks/_checkpoint.py``).

Usage: python benchmarks/infer.py [--variant n] [--repeats 5] [--predict ../shared/data/coco128_coco/train2017] [--predict-images 41]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks._checkpoint` when run as a script

from lucidyolo.decode.e2e import e2e_topk
from lucidyolo.models import create_model
from lucidyolo.models.deploy import make_deploy_model
from lucidyolo.structures.box_coder import ltrb_to_xyxy


class FullEvalModel(nn.Module):
    """What a user runs without the deploy view: the whole model in eval mode (both branches), e2e decode."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        out = self.model(images)
        boxes = ltrb_to_xyxy(out["o2o"]["boxes"], out["anchors"], out["strides"])
        return e2e_topk(boxes, out["o2o"]["logits"])[0]


class UnfoldedDeploy(nn.Module):
    """The same computation as the deployed graph (trunk + o2o + top-k), without BN folding."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        feats = self.model.features(images)
        raw = self.model.head.o2o(feats)
        anchors, strides = self.model.anchor_cache(feats)
        return e2e_topk(ltrb_to_xyxy(raw["boxes"], anchors, strides), raw["logits"])[0]


def _interleaved_median_ms(fns: list, images: torch.Tensor, repeats: int) -> list[float]:
    """Median milliseconds of each function, alternating them so load spikes hit both alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, acc in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn(images)
            acc.append((time.perf_counter() - t0) * 1e3)
    return [sorted(t)[len(t) // 2] for t in times]


def _alone_median_ms(model: nn.Module, repeats: int) -> float:
    """Median milliseconds of ``repeats`` consecutive b1 x 640 channels-last forwards of ``model`` alone."""
    model = model.to(memory_format=torch.channels_last)
    images = torch.rand(1, 3, 640, 640).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        for _ in range(3):  # warm-up
            model(images)
        return _interleaved_median_ms([model], images, repeats)[0]  # one function: nothing to interleave


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="n")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--alone-repeats", type=int, default=30)
    parser.add_argument("--predict", type=Path, default=None, help="a folder of JPEGs for the lucid predict latency")
    parser.add_argument("--predict-images", type=int, default=41)
    parser.add_argument("--predict-size", type=int, default=640)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = create_model(args.variant).eval()
    unfolded = UnfoldedDeploy(model).eval()
    full = FullEvalModel(model).eval()
    folded = make_deploy_model(model)
    result: dict = {"benchmark": "infer", "variant": args.variant, "threads": torch.get_num_threads()}
    for batch, size in ((1, 640), (8, 320)):
        for channels_last in (False, True):
            images = torch.rand(batch, 3, size, size)
            fmt = torch.channels_last if channels_last else torch.contiguous_format
            images = images.contiguous(memory_format=fmt)
            a, b, c = unfolded.to(memory_format=fmt), folded.to(memory_format=fmt), full.to(memory_format=fmt)
            with torch.inference_mode():
                for _ in range(2):  # warm-up (allocator, kernels)
                    a(images)
                    b(images)
                    c(images)
                ms_a, ms_b, ms_c = _interleaved_median_ms([a, b, c], images, args.repeats)
            tag = f"b{batch}x{size}{'_cl' if channels_last else ''}"
            result[f"{tag}_unfolded_ms"] = round(ms_a, 2)
            result[f"{tag}_folded_ms"] = round(ms_b, 2)
            result[f"{tag}_full_eval_ms"] = round(ms_c, 2)
            # same graph with and without folding, and the deploy view against the whole eval model
            result[f"{tag}_speedup"] = round(ms_a / ms_b, 3)
            result[f"{tag}_speedup_vs_full_eval"] = round(ms_c / ms_b, 3)
    result["b1x640_cl_folded_alone_ms"] = round(_alone_median_ms(folded, args.alone_repeats), 2)
    result["b1x640_folded_target_ms"] = 40.0
    if args.predict is not None:
        result.update(predict_latency(args.predict, args.predict_images, args.predict_size, args.variant))
    print(json.dumps(result))


def predict_latency(folder: Path, n: int, size: int, variant: str) -> dict:
    """Milliseconds per image of the engine's ``run_predict`` over ``n`` JPEGs: median gap between images."""
    from benchmarks._checkpoint import det_checkpoint
    from lucidyolo.engine.commands.predict import run_predict

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg"))[:n]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = det_checkpoint(Path(tmp), variant)
        stamps: list[float] = []
        run_predict(ckpt, str(files[0]), img_size=size)  # warm-up: process, allocator, kernels
        listing = Path(tmp) / "images"
        listing.mkdir()
        for f in files:
            (listing / f.name).symlink_to(f.resolve())
        t0 = time.perf_counter()
        # batch 1: the latency of one image (in batches the images of a batch finish together)
        run_predict(ckpt, str(listing), img_size=size, batch_size=1,
                    on_image=lambda *_: stamps.append(time.perf_counter()))
        total = time.perf_counter() - t0
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    return {"predict_images": len(files), "predict_img_size": size,
            "predict_ms_per_image_median": round(gaps[len(gaps) // 2] * 1e3, 2),
            "predict_ms_per_image_mean_incl_setup": round(total / len(files) * 1e3, 2)}


if __name__ == "__main__":
    main()
