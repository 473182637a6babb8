"""Fine-tuning benchmark (issue 29): what starting from weights buys; prints ONE JSON line.

1. Pretrain ``lucid fit det`` on ``../shared/data/shapes`` (rectangle, ellipse,
   triangle; 30 epochs, 320 px, batch 8).
2. Write a second shapes set with this file's own generator (another seed; the
   same kind of scenes: 1-6 filled rectangles, ellipses and triangles of random
   colours on noisy gradients, plus a fourth class, ``pentagon``) whose class
   order is permuted: ``triangle, pentagon, rectangle, ellipse``; 256 training
   and 64 validation images. With 64 training images (the pretraining set's
   size) five epochs are 40 optimizer steps: fine-tuned by name reached 0.087
   (128 images: 0.085); with 256, 160 steps, 0.18 against 0.004 from scratch
   (64 validation images in all three).
3. Fine-tune on it for 5 epochs three ways: ``--model.weights`` (classes by
   name), from scratch, and ``--model.class_match position``.
4. Det -> seg: 5 epochs of seg on the synthetic polygon set from the det
   checkpoint, against 5 from scratch.

Every run is the real console script at its defaults otherwise. Reports the
last epoch's primary metric (mAP50-95; seg: mask mAP50-95) and the wall time of
each run. Targets: fine-tuned >= 2 x scratch and >= 0.10; name >= position.

Usage: ``python benchmarks/finetune.py [--data-root DIR] [--pretrain-epochs 30] [--epochs 5] [--second-train 256]
[--second-val 64] [--pretrained CKPT] [--skip-seg] [--extra "..."]``
(smaller epoch counts make a quick plumbing check, not the benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

DEFAULT_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "shapes"
SECOND_SET_NAMES = ["triangle", "pentagon", "rectangle", "ellipse"]
"""The shapes set's classes (rectangle, ellipse, triangle) permuted, plus one new class."""


def _polygon(kind: str, cx: float, cy: float, r: float, rot: float) -> list[tuple[float, float]]:
    sides = {"triangle": 3, "pentagon": 5}[kind]
    a = rot + np.arange(sides) * 2 * np.pi / sides
    return [(float(x), float(y)) for x, y in zip(cx + r * np.cos(a), cy + r * np.sin(a), strict=True)]


def write_second_set(out: Path, seed: int = 1, train: int = 64, val: int = 16, w: int = 640, h: int = 480) -> Path:
    """A YOLO root of ``SECOND_SET_NAMES`` scenes (``images/{train,val}``, ``labels/...``, ``data.yaml``).

    Backgrounds are linear gradients between two random colours along a random axis (horizontal or
    vertical) with mild noise, as in the shapes set; the shapes are filled in random colours.
    """
    rng = np.random.default_rng(seed)
    for split, n in (("train", train), ("val", val)):
        (out / "images" / split).mkdir(parents=True, exist_ok=True)
        (out / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            start, end = rng.uniform(0, 200, 3), rng.uniform(0, 200, 3)
            horizontal = bool(rng.integers(0, 2))
            ramp = np.linspace(0, 1, w)[None, :, None] if horizontal else np.linspace(0, 1, h)[:, None, None]
            canvas = start * (1 - ramp) + end * ramp + rng.normal(0, 6, (h, w, 3))
            img = Image.fromarray(np.clip(canvas, 0, 255).astype(np.uint8))
            draw = ImageDraw.Draw(img)
            rows = []
            for _ in range(int(rng.integers(1, 7))):
                label = int(rng.integers(0, len(SECOND_SET_NAMES)))
                kind = SECOND_SET_NAMES[label]
                r = float(rng.uniform(0.05, 0.2) * min(w, h))
                cx, cy = float(rng.uniform(r, w - r)), float(rng.uniform(r, h - r))
                colour = tuple(int(v) for v in rng.integers(0, 256, 3))
                if kind == "rectangle":
                    hw, hh = r, r * float(rng.uniform(0.4, 1.0))
                    box = (cx - hw, cy - hh, cx + hw, cy + hh)
                    draw.rectangle(box, fill=colour)
                elif kind == "ellipse":
                    hw, hh = r, r * float(rng.uniform(0.4, 1.0))
                    box = (cx - hw, cy - hh, cx + hw, cy + hh)
                    draw.ellipse(box, fill=colour)
                else:
                    pts = _polygon(kind, cx, cy, r, float(rng.uniform(0, 2 * np.pi)))
                    draw.polygon(pts, fill=colour)
                    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                    box = (min(xs), min(ys), max(xs), max(ys))
                x1, y1, x2, y2 = box
                rows.append(f"{label} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}")
            img.save(out / "images" / split / f"{i:04d}.jpg", quality=92)
            (out / "labels" / split / f"{i:04d}.txt").write_text("\n".join(rows) + "\n")
    names = "\n".join(f"  {i}: {n}" for i, n in enumerate(SECOND_SET_NAMES))
    (out / "data.yaml").write_text(f"path: .\ntrain: images/train\nval: images/val\nnames:\n{names}\n")
    return out


def fit(lucid: str, task: str, root: Path, runs: Path, epochs: int, extra: list[str]) -> dict:
    """One ``lucid fit`` (320 px, batch 8): its wall time, primary metric and the weights line."""
    cmd = [lucid, "fit", task, "--data-root", str(root), "--data.img_size", "320", "--data.batch_size", "8",
           "--trainer.max_epochs", str(epochs), "--trainer.default_root_dir", str(runs), *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    last = [ln for ln in done.stdout.splitlines() if ln.startswith("done:")][-1]
    found = re.search(r"done: (\S+) ([0-9.]+)", last)
    assert found is not None, last
    weights = next((ln for ln in done.stdout.splitlines() if ln.startswith("weights:")), None)
    best = re.search(r"best checkpoint (\S+)$", last)
    return {"metric": found.group(1), "value": float(found.group(2)), "wall_s": round(wall, 1),
            "weights_line": weights, "best": best.group(1) if best else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", type=Path, default=Path(os.environ.get("LUCID_SHAPES", DEFAULT_ROOT)))
    ap.add_argument("--pretrain-epochs", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--second-train", type=int, default=256, help="training images of the second set")
    ap.add_argument("--second-val", type=int, default=64, help="validation images of the second set")
    ap.add_argument("--seg-images", type=int, default=80, help="size of the synthetic polygon set")
    ap.add_argument("--pretrained", help="reuse this det checkpoint instead of pretraining (a quicker re-run)")
    ap.add_argument("--skip-seg", action="store_true", help="leave out the det -> seg comparison")
    ap.add_argument("--extra", default="", help="more `lucid fit` options for every run, one shell-quoted string")
    args = ap.parse_args()
    if not args.data_root.is_dir():
        sys.exit(f"{args.data_root} is absent (pass --data-root)")
    lucid = shutil.which("lucid") or str(Path(sys.executable).with_name("lucid"))
    extra = shlex.split(args.extra)
    work = Path(tempfile.mkdtemp(prefix="lucid-finetune-"))
    try:
        if args.pretrained:
            pre = {"value": None, "wall_s": None, "best": args.pretrained}
        else:
            pre = fit(lucid, "det", args.data_root, work / "pre", args.pretrain_epochs, extra)
        ckpt = pre["best"]
        second = write_second_set(work / "second", train=args.second_train, val=args.second_val)
        named = fit(lucid, "det", second, work / "named", args.epochs, ["--model.weights", ckpt, *extra])
        scratch = fit(lucid, "det", second, work / "scratch", args.epochs, extra)
        position = fit(lucid, "det", second, work / "position", args.epochs,
                       ["--model.weights", ckpt, "--model.class_match", "position", *extra])
        seg_from_det = seg_scratch = None
        if not args.skip_seg:
            from lucidyolo.tasks.registry import get_task

            seg_spec = get_task("seg")
            assert seg_spec.make_synthetic is not None
            polygons = Path(seg_spec.make_synthetic(work / "polygons", args.seg_images, 320, 1))
            seg_from_det = fit(lucid, "seg", polygons, work / "seg_det", args.epochs, ["--model.weights", ckpt, *extra])
            seg_scratch = fit(lucid, "seg", polygons, work / "seg_scratch", args.epochs, extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ft, sc, pos = named["value"], scratch["value"], position["value"]
    print(json.dumps({
        "pretrain": {"epochs": args.pretrain_epochs, "map50_95": pre["value"], "wall_s": pre["wall_s"]},
        "finetune_epochs": args.epochs,
        "finetuned_by_name": {"map50_95": ft, "wall_s": named["wall_s"], "line": named["weights_line"]},
        "scratch": {"map50_95": sc, "wall_s": scratch["wall_s"]},
        "finetuned_by_position": {"map50_95": pos, "wall_s": position["wall_s"], "line": position["weights_line"]},
        "second_set": {"train": args.second_train, "val": args.second_val},
        **({} if seg_from_det is None or seg_scratch is None else {
            "seg_from_det": {seg_from_det["metric"]: seg_from_det["value"], "wall_s": seg_from_det["wall_s"],
                             "line": seg_from_det["weights_line"]},
            "seg_scratch": {seg_scratch["metric"]: seg_scratch["value"], "wall_s": seg_scratch["wall_s"]},
        }),
        "targets": {"finetuned_ge_2x_scratch": ft >= 2 * sc, "finetuned_ge_0.10": ft >= 0.10,
                    "name_ge_position": ft >= pos},
        "torch_threads": os.environ.get("OMP_NUM_THREADS"),
    }))


if __name__ == "__main__":
    main()
