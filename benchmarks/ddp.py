"""1 process at batch 8 against 2 processes at batch 4 (gloo, CPU, 1 torch thread each); prints ONE JSON line.

The point is equality, not speed (on 2 cores two processes are not faster):
``lucid fit det`` on the shapes set (``../shared/data/shapes``: 64 train / 16 val
images made outside this project) three times through the real console script,
float32, EMA off, 0 loader workers, seed 0:

- ``one``: 1 process, batch 8;
- ``two``: 2 processes (``--trainer.devices 2 --trainer.strategy ddp``), batch 4 each;
- ``noise``: 1 process, batch 8, on 2 torch threads instead of 1: the same training
  with only the float summation order changed, the yardstick for ``two``.

Reported: the largest |difference| of the trained weights (BatchNorm running
statistics apart) after ``epochs x steps`` optimizer steps, ``two`` vs ``one`` and
``noise`` vs ``one``; the per-epoch training loss curve of each run (``results.csv``,
averaged over every process) and its largest relative difference from ``one``;
wall time per epoch (from the run's epoch lines, epochs 2..E) and the whole command.

Usage: ``python benchmarks/ddp.py [--data-root DIR] [--epochs 3] [--steps 8] [--img-size 320]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "shapes"
LOSS_TERMS = ("train/box_loss", "train/cls_loss", "train/l1_loss")


def _elapsed_s(line: str) -> float | None:
    """Seconds of an epoch line's ``M:SS elapsed`` (or ``H:MM:SS``)."""
    m = re.search(r"(\d+(?::\d+)+) elapsed", line)
    if m is None:
        return None
    secs = 0.0
    for part in m.group(1).split(":"):
        secs = secs * 60 + int(part)
    return secs


def run(
    name: str, root: Path, work: Path, args: argparse.Namespace, processes: int, threads: int
) -> dict:
    lucid = str(Path(sys.executable).parent / "lucid")
    shape = (
        ["--data.batch_size", "8"]
        if processes == 1
        else ["--data.batch_size", "4", "--trainer.devices", "2", "--trainer.strategy", "ddp"]
    )
    cmd = [
        lucid,
        "fit",
        "det",
        "--data-root",
        str(root),
        "--data.img_size",
        str(args.img_size),
        "--trainer.max_epochs",
        str(args.epochs),
        "--trainer.limit_train_batches",
        str(args.steps),
        "--trainer.accelerator",
        "cpu",
        "--trainer.precision",
        "32-true",
        "--ema.enabled",
        "false",
        "--data.num_workers",
        "0",
        "--seed",
        "0",
        "--trainer.default_root_dir",
        str(work / name),
        *shape,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "COLUMNS": "200"}
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{name} failed:\n{r.stderr[-3000:]}")
    elapsed = [
        e
        for line in r.stdout.splitlines()
        if line.startswith("epoch ") and (e := _elapsed_s(line)) is not None
    ]
    per_epoch = (
        (elapsed[-1] - elapsed[0]) / (len(elapsed) - 1)
        if len(elapsed) > 1
        else (elapsed or [wall])[0]
    )
    rows = list(
        csv.DictReader((work / name / "version_0" / "results.csv").read_text().splitlines())
    )
    return {
        "processes": processes,
        "batch_per_process": 8 // processes,
        "threads_per_process": threads,
        "wall_s": round(wall, 1),
        "wall_per_epoch_s": round(per_epoch, 2),
        "loss_curve": [{k: float(row[k]) for k in LOSS_TERMS} for row in rows],
        "map50_95": float(rows[-1]["metrics/mAP50-95(B)"]),
        "checkpoint": str(work / name / "version_0" / "checkpoints" / "last.ckpt"),
    }


def weight_difference(a: str, b: str) -> float:
    import torch

    sa, sb = (torch.load(p, map_location="cpu", weights_only=False)["state_dict"] for p in (a, b))
    return max(
        (sa[k] - sb[k]).abs().max().item()
        for k in sa
        if sa[k].is_floating_point() and "running" not in k
    )


def loss_difference(a: list[dict], b: list[dict]) -> float:
    return max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b, strict=True) for k in LOSS_TERMS)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-root", type=Path, default=DEFAULT_ROOT)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument(
        "--steps",
        type=int,
        default=8,
        help="optimizer steps per epoch (8: the whole 64-image split)",
    )
    p.add_argument("--img-size", type=int, default=320)
    args = p.parse_args()
    if not args.data_root.is_dir():
        raise SystemExit(f"no data at {args.data_root}: pass --data-root")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        one = run("one", args.data_root, work, args, processes=1, threads=1)
        two = run("two", args.data_root, work, args, processes=2, threads=1)
        noise = run("noise", args.data_root, work, args, processes=1, threads=2)
        result = {
            "benchmark": "ddp",
            "data_root": str(args.data_root),
            "img_size": args.img_size,
            "epochs": args.epochs,
            "steps": args.epochs * args.steps,
            "max_weight_diff": {
                "two_vs_one": weight_difference(one["checkpoint"], two["checkpoint"]),
                "noise_vs_one": weight_difference(one["checkpoint"], noise["checkpoint"]),
            },
            "max_loss_rel_diff": {
                "two_vs_one": loss_difference(one["loss_curve"], two["loss_curve"]),
                "noise_vs_one": loss_difference(one["loss_curve"], noise["loss_curve"]),
            },
            "wall_per_epoch_ratio_two_over_one": round(
                two["wall_per_epoch_s"] / one["wall_per_epoch_s"], 2
            ),
            "runs": {
                k: {key: v for key, v in r.items() if key != "checkpoint"}
                for k, r in (("one", one), ("two", two), ("noise", noise))
            },
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
