"""The laptop-CPU training benchmark: ``lucid fit TASK`` on a small set at its defaults; prints ONE JSON line.

Runs the real console script at 320 px, batch 8, 30 epochs and every other
setting at its default, as a user would type it. ``--task det`` (the default)
trains on ``../shared/data/shapes`` (64 train / 16 val images of coloured shapes
made outside this project); any other task (``seg``, ``obb``, ``keypoints``, a
plugin's), or det with ``--synthetic``, on 80 images of the task's own synthetic
set (its ``make_synthetic`` hook, seed 0, drawn at 320 px: 64 train / 16 val), so
the tasks' loops compare per image on sets of one size. It reads what the run
prints (one line per epoch when stdout is a pipe) and writes (results.csv):

- ``wall_s``: the whole command, process start to exit;
- ``time_to_first_step_s``: process start to the "first training step done" line;
- ``train_img_per_s``: mean training-loop images/s over epochs 2..E (epoch 1 pays the start-up);
- ``val_s_per_epoch``: mean validation time per epoch;
- ``metric``, ``value``: the task's primary validation metric after the last epoch (the
  run's closing ``done:`` line; e.g. ``val/mAP50-95``, ``val/segm_mAP50-95``, ``val/oks_mAP``);
- ``map50_95``, ``map50``: the last epoch's box metrics, where the task has them;
- ``machine_matmul_gflops``: float32 1024^3 matmul throughput at the run's thread
  count, measured before the run (machines of one "2-core" class have differed
  by 2x and more: compare wall times across machines only through this).

A shared CPU (issue 35, item 5): ``--compete N`` starts N single-threaded CPU-bound
processes (a Python spin loop, what a build or a second job is to the scheduler) before
the fit and stops them after it; ``--threads T`` runs the fit with ``OMP_NUM_THREADS=T``
(torch's intra-op threads; the default lets ``trainer.threads: auto`` choose) and
``--omp-wait passive|active`` with ``OMP_WAIT_POLICY``. The JSON line records all three
and ``threads_used``, the count the run recorded in its ``config.yaml``.

Usage: ``python benchmarks/fit_shapes.py [--task det] [--synthetic] [--data-root DIR] [--epochs 30]
[--extra "--model.lr 0.04 ..."] [--compete 1] [--threads 1] [--omp-wait passive]``.
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

import yaml

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


SYNTHETIC_IMAGES = 80
"""The synthetic set's size: as many images as the shapes set (the tasks' hooks split 80 / 20)."""


def _float(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="det", help="task name or alias (default det)")
    ap.add_argument("--synthetic", action="store_true", help="det too on its synthetic set (other tasks always)")
    ap.add_argument("--data-root", type=Path, default=None, help="train on this root instead")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--extra", default="", help="more `lucid fit` options, one shell-quoted string")
    ap.add_argument("--compete", type=int, default=0, help="CPU-bound processes running beside the fit")
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of the fit (default: inherited)")
    ap.add_argument("--omp-wait", choices=("passive", "active"), default=None, help="OMP_WAIT_POLICY of the fit")
    args = ap.parse_args()
    lucid = shutil.which("lucid") or str(Path(sys.executable).with_name("lucid"))
    work = Path(tempfile.mkdtemp(prefix="lucid-fit-shapes-"))
    data_root = args.data_root
    if data_root is None and args.task == "det" and not args.synthetic:
        data_root = Path(os.environ.get("LUCID_SHAPES", DEFAULT_ROOT))
    if data_root is None:
        from lucidyolo.tasks.registry import get_task

        spec = get_task(args.task)
        if spec.make_synthetic is None:
            sys.exit(f"task {spec.name!r} has no synthetic set (pass --data-root)")
        data_root = Path(spec.make_synthetic(out_dir=work / "data", num_images=SYNTHETIC_IMAGES, img_size=320, seed=0))
    if not data_root.is_dir():
        sys.exit(f"{data_root} is absent (pass --data-root)")
    gflops = matmul_gflops()
    cmd = [lucid, "fit", args.task, "--data-root", str(data_root), "--data.img_size", "320", "--data.batch_size", "8",
           "--trainer.max_epochs", str(args.epochs), "--trainer.default_root_dir", str(work / "runs"),
           *shlex.split(args.extra)]
    env = dict(os.environ)
    if args.threads is not None:
        env["OMP_NUM_THREADS"] = str(args.threads)
    if args.omp_wait is not None:
        env["OMP_WAIT_POLICY"] = args.omp_wait.upper()
    rivals = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.compete)]
    try:
        t0 = time.perf_counter()
        first_step = None
        lines: list[str] = []
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work,
                              env=env) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip())
                if first_step is None and line.startswith("first training step done"):
                    first_step = time.perf_counter() - t0
        wall = time.perf_counter() - t0
    finally:
        for rival in rivals:
            rival.kill()
            rival.wait()
    if proc.returncode != 0:
        sys.exit("lucid fit failed:\n" + "\n".join(lines[-40:]))
    epochs = [ln for ln in lines if ln.startswith("epoch ")]
    rates = [float(m.group(1)) for ln in epochs[1:] if (m := re.search(r"\| ([0-9.]+) img/s \|", ln))]
    vals = [float(m.group(1)) for ln in epochs if (m := re.search(r"\| val ([0-9.]+) s \|", ln))]
    with open(work / "runs" / "version_0" / "results.csv") as f:
        last = list(csv.DictReader(f))[-1]
    with open(work / "runs" / "version_0" / "config.yaml") as f:
        used = (yaml.safe_load(f) or {}).get("trainer", {}).get("threads")
    done = next((m for ln in reversed(lines) if (m := re.match(r"done: (\S+) ([-0-9.e]+|nan)", ln))), None)
    print(json.dumps({
        "command": " ".join(cmd[1:]), "task": args.task, "epochs": args.epochs,
        "torch_threads": env.get("OMP_NUM_THREADS"), "omp_wait_policy": env.get("OMP_WAIT_POLICY"),
        "competing_processes": args.compete, "threads_used": used,
        "wall_s": round(wall, 1), "time_to_first_step_s": None if first_step is None else round(first_step, 1),
        "train_img_per_s": round(sum(rates) / len(rates), 2) if rates else None,
        "val_s_per_epoch": round(sum(vals) / len(vals), 2) if vals else None,
        "metric": None if done is None else done.group(1),
        "value": None if done is None else float(done.group(2)),
        "map50_95": _float(last.get("metrics/mAP50-95(B)")), "map50": _float(last.get("metrics/mAP50(B)")),
        "machine_matmul_gflops": gflops,
    }))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
