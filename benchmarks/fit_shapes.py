"""The laptop-CPU training benchmark: ``lucid fit det`` on the shapes set at its defaults; prints ONE JSON line.

Runs the real console script on ``../shared/data/shapes`` (64 train / 16 val images
of coloured shapes made outside this project) at 320 px, batch 8, 30 epochs and
every other setting at its default, as a user would type it, and reads what the
run prints (one line per epoch when stdout is a pipe) and writes (results.csv):

- ``wall_s``: the whole command, process start to exit;
- ``time_to_first_step_s``: process start to the "first training step done" line;
- ``train_img_per_s``: mean training-loop images/s over epochs 2..E (epoch 1 pays the start-up);
- ``val_s_per_epoch``: mean validation time per epoch;
- ``map50_95``, ``map50``: the last epoch's validation metrics;
- ``machine_matmul_gflops``: float32 1024^3 matmul throughput at the run's thread
  count, measured before the run (machines of one "2-core" class have differed
  by 2x and more: compare wall times across machines only through this).

Usage: ``python benchmarks/fit_shapes.py [--data-root DIR] [--epochs 30] [--extra "--model.lr 0.04 ..."]``.
"""

from __future__ import annotations

import argparse
import csv
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

DEFAULT_ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "shapes"


def matmul_gflops() -> float:
    """Median float32 GFLOP/s of a 1024 x 1024 matmul (in a child process, so this one stays torch-free)."""
    code = (
        "import statistics, time, torch\n"
        "a = torch.randn(1024, 1024)\n"
        "[a @ a for _ in range(5)]\n"
        "ts = []\n"
        "for _ in range(20):\n"
        "    t = time.perf_counter(); a @ a; ts.append(time.perf_counter() - t)\n"
        "print(2 * 1024 ** 3 / statistics.median(ts) / 1e9)\n"
    )
    return round(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", type=Path, default=Path(os.environ.get("LUCID_SHAPES", DEFAULT_ROOT)))
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--extra", default="", help="more `lucid fit` options, one shell-quoted string")
    args = ap.parse_args()
    if not args.data_root.is_dir():
        sys.exit(f"{args.data_root} is absent (pass --data-root)")
    lucid = shutil.which("lucid") or str(Path(sys.executable).with_name("lucid"))
    gflops = matmul_gflops()
    work = Path(tempfile.mkdtemp(prefix="lucid-fit-shapes-"))
    cmd = [lucid, "fit", "det", "--data-root", str(args.data_root), "--data.img_size", "320", "--data.batch_size", "8",
           "--trainer.max_epochs", str(args.epochs), "--trainer.default_root_dir", str(work / "runs"),
           *shlex.split(args.extra)]
    t0 = time.perf_counter()
    first_step = None
    lines: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if first_step is None and line.startswith("first training step done"):
                first_step = time.perf_counter() - t0
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit("lucid fit failed:\n" + "\n".join(lines[-40:]))
    epochs = [ln for ln in lines if ln.startswith("epoch ")]
    rates = [float(m.group(1)) for ln in epochs[1:] if (m := re.search(r"\| ([0-9.]+) img/s \|", ln))]
    vals = [float(m.group(1)) for ln in epochs if (m := re.search(r"\| val ([0-9.]+) s \|", ln))]
    with open(work / "runs" / "version_0" / "results.csv") as f:
        last = list(csv.DictReader(f))[-1]
    print(json.dumps({
        "command": " ".join(cmd[1:]), "epochs": args.epochs, "torch_threads": os.environ.get("OMP_NUM_THREADS"),
        "wall_s": round(wall, 1), "time_to_first_step_s": None if first_step is None else round(first_step, 1),
        "train_img_per_s": round(sum(rates) / len(rates), 2) if rates else None,
        "val_s_per_epoch": round(sum(vals) / len(vals), 2) if vals else None,
        "map50_95": float(last["metrics/mAP50-95(B)"]), "map50": float(last["metrics/mAP50(B)"]),
        "machine_matmul_gflops": gflops,
    }))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
