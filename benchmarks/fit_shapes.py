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

Beside the reference trainer (an optional comparison, never a dependency): ``--reference CMD``
names the reference's console script (``yolo``; e.g. installed with ``pip install --target DIR``
outside lucid's environment, ``PYTHONPATH=DIR``). Both tools then train on one YOLO-format set
(the task's fields drawn by lucid's synthetic writer, 64 train / 16 val at 320 px, written to a
temporary folder), one after the other, at the same size, batch, epochs, threads and 0 loader
workers, each at its own defaults otherwise; the reference model is ``yolo26n{suffix}.yaml``
(``--reference-model`` overrides it). The JSON line gains ``reference`` (its wall, loop images/s
from its last progress line of each epoch, 2..E, and its own final mAP50-95 column) and
``loop_vs_reference`` / ``wall_vs_reference`` (lucid's over the reference's).

The machine class (``avx512_amx``, ``avx512``, ``avx2``: the widest vector unit torch uses, after
``ATEN_CPU_CAPABILITY``) is recorded as ``cpu_capability``; ``ATEN_CPU_CAPABILITY=avx2
ONEDNN_MAX_CPU_ISA=AVX2`` makes an AVX-512 machine train as an AVX2 one does (both tools).

Usage: ``python benchmarks/fit_shapes.py [--task det] [--synthetic] [--data-root DIR] [--epochs 30]
[--extra "--optim.lr 0.04 ..."] [--compete 1] [--threads 1] [--omp-wait passive]
[--reference yolo [--reference-model yolo26n-pose.yaml]]``.
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


REFERENCE_MODELS = {"det": "yolo26n.yaml", "seg": "yolo26n-seg.yaml", "obb": "yolo26n-obb.yaml",
                    "keypoints": "yolo26n-pose.yaml"}
"""The reference's nano model of each built-in task (a plugin's: ``--reference-model``)."""


def cpu_capability() -> str:
    """The vector unit torch's CPU kernels use here (honours ``ATEN_CPU_CAPABILITY``), with AMX when present."""
    code = ("import torch\n"
            "cap = torch.backends.cpu.get_cpu_capability().lower()\n"
            "amx = getattr(torch.cpu, '_is_amx_tile_supported', lambda: False)()\n"
            "print(cap + ('_amx' if amx and cap.startswith('avx512') else ''))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def write_yolo_set(task: str, out: Path) -> Path:
    """The task's synthetic set as a YOLO root both tools read (its yaml gets an absolute ``path:``)."""
    from lucidyolo.data.synth import write_synthetic
    from lucidyolo.tasks.registry import get_task

    root = write_synthetic(out, get_task(task).fields, SYNTHETIC_IMAGES, 320, seed=0, fmt="yolo")
    yaml_path = root / "data.yaml"
    text = yaml_path.read_text()
    yaml_path.write_text("\n".join(f"path: {root}" if ln.startswith("path:") else ln for ln in text.splitlines()) + "\n")
    return yaml_path


def reference_rates(log: str, batch: int = 8) -> dict[int, float]:
    """Training images/s of each epoch from the reference's log: its progress bar's last state per epoch.

    A final state reads ``2/30  0G  2.769 ... 320: 100% ━━━ 8/8 2.2it/s 3.7s``
    (epoch, losses, batches done of all, rate, elapsed): ``8 * 8 / 3.7`` images/s.
    Validation bars (no epoch first) and unfinished states are skipped.
    """
    finals: dict[int, float] = {}
    for part in log.replace("\r", "\n").splitlines():
        line = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", part).strip()
        m = re.match(r"(\d+)/\d+\s.*\s(\d+)/(\d+) [0-9.]+(?:it/s|s/it) ([0-9.]+)s$", line)
        if m and m.group(2) == m.group(3) and float(m.group(4)) > 0:
            finals[int(m.group(1))] = int(m.group(3)) * batch / float(m.group(4))
    return finals


def run_reference(cmd: str, model: str, data_yaml: Path, epochs: int, env: dict[str, str], work: Path) -> dict[str, object]:
    """Train the reference trainer on ``data_yaml``; its wall, loop images/s (epochs 2..E) and final mAP50-95."""
    home = work / "reference-home"  # its settings file and any cache stay in the temporary folder
    home.mkdir(parents=True, exist_ok=True)
    args = [*shlex.split(cmd), "train", f"model={model}", f"data={data_yaml}", f"epochs={epochs}", "imgsz=320",
            "batch=8", "workers=0", "device=cpu", "plots=False", f"project={work / 'reference'}", "name=run",
            "exist_ok=True"]
    t0 = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, cwd=work, env=dict(env, HOME=str(home), YOLO_OFFLINE="1"))
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit("the reference trainer failed:\n" + (done.stdout + done.stderr)[-4000:])
    finals = reference_rates(done.stdout + done.stderr)
    rates = [r for e, r in finals.items() if e > 1]
    with open(work / "reference" / "run" / "results.csv") as f:
        last = {k.strip(): v for k, v in list(csv.DictReader(f))[-1].items()}
    metric = next((k for k in ("metrics/mAP50-95(M)", "metrics/mAP50-95(P)", "metrics/mAP50-95(B)") if k in last), None)
    return {"command": " ".join(args), "wall_s": round(wall, 1),
            "train_img_per_s": None if not rates else round(sum(rates) / len(rates), 2),
            "own_metric": metric, "own_value": None if metric is None else float(last[metric])}


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
    ap.add_argument("--reference", default=None, help="the reference trainer's console script: train it side by side")
    ap.add_argument("--reference-model", default=None, help="its model yaml (default: the task's nano model)")
    args = ap.parse_args()
    lucid = shutil.which("lucid") or str(Path(sys.executable).with_name("lucid"))
    work = Path(tempfile.mkdtemp(prefix="lucid-fit-shapes-"))
    data_root = args.data_root
    if data_root is None and args.reference:
        data_root = write_yolo_set(args.task, work / "data")
    if data_root is None and args.task == "det" and not args.synthetic:
        data_root = Path(os.environ.get("LUCID_SHAPES", DEFAULT_ROOT))
    if data_root is None:
        from lucidyolo.tasks.registry import get_task

        spec = get_task(args.task)
        if spec.make_synthetic is None:
            sys.exit(f"task {spec.name!r} has no synthetic set (pass --data-root)")
        data_root = Path(spec.make_synthetic(out_dir=work / "data", num_images=SYNTHETIC_IMAGES, img_size=320, seed=0))
    if not data_root.exists():
        sys.exit(f"{data_root} is absent (pass --data-root)")
    gflops = matmul_gflops()
    capability = cpu_capability()
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
    out: dict[str, object] = {
        "command": " ".join(cmd[1:]), "task": args.task, "epochs": args.epochs,
        "torch_threads": env.get("OMP_NUM_THREADS"), "omp_wait_policy": env.get("OMP_WAIT_POLICY"),
        "competing_processes": args.compete, "threads_used": used,
        "wall_s": round(wall, 1), "time_to_first_step_s": None if first_step is None else round(first_step, 1),
        "train_img_per_s": round(sum(rates) / len(rates), 2) if rates else None,
        "val_s_per_epoch": round(sum(vals) / len(vals), 2) if vals else None,
        "metric": None if done is None else done.group(1),
        "value": None if done is None else float(done.group(2)),
        "map50_95": _float(last.get("metrics/mAP50-95(B)")), "map50": _float(last.get("metrics/mAP50(B)")),
        "machine_matmul_gflops": gflops, "cpu_capability": capability,
    }
    if args.reference:
        model = args.reference_model or REFERENCE_MODELS.get(args.task)
        if model is None:
            sys.exit(f"no reference model for task {args.task!r}: pass --reference-model")
        ref = run_reference(args.reference, model, data_root, args.epochs, env, work)
        out["reference"] = ref
        if ref["train_img_per_s"] and out["train_img_per_s"]:
            out["loop_vs_reference"] = round(out["train_img_per_s"] / ref["train_img_per_s"], 2)
        out["wall_vs_reference"] = round(out["wall_s"] / ref["wall_s"], 2)
    print(json.dumps(out))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
