"""The first thing to run on a GPU: every CUDA-only path once, pass/fail and step times as JSON, in minutes.

No CI machine has a GPU, so these paths run nowhere else. Each check is
independent (one failing does not stop the others):

- ``device_hsv``: the batched HSV jitter on CUDA against the same function on
  the CPU (same images, same gains).
- ``objective_<task>``: one batch of every built-in task through the model and
  the whole objective (assignment, box, class, mask, rotated, keypoint terms) on
  CUDA in float32 against the CPU, same weights.
- ``fit_<task>_<precision>``: ``lucid fit`` through the console script on CUDA
  (channels_last, pinned memory and the CUDA loader path are the defaults
  there) in ``16-mixed`` and ``bf16-mixed``; the epoch lines' img/s and the
  final metric.
- ``fit_det_compiled_device_hsv``: ``model.compile_step`` and ``data.device_hsv``.
- ``eval_det_cuda`` / ``predict_det_cuda``: evaluation and prediction on CUDA.
- ``ddp_det_2gpu``: a 2-process DDP fit when two GPUs are present.

Without CUDA it prints ``{"skipped": ...}`` and exits 0 (tests/benchmarks check
that plumbing on the CPU)::

    python benchmarks/gpu_check.py [--out gpu_check.json] [--tasks det,seg,obb,keypoints]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

LUCID = str(Path(sys.executable).parent / "lucid")
OUT_DIR: Path | None = None
"""The folder of ``--out``: files worth taking home (a batch that gives non-finite gradients) go there."""


def run_check(results: dict[str, Any], name: str, body: Callable[[], dict[str, Any]]) -> None:
    """Run ``body``; record ``{"passed": bool, "seconds": s, ...its fields}`` or the error under ``name``."""
    t0 = time.perf_counter()
    try:
        row = dict(body())
        row.setdefault("passed", True)
    except Exception as exc:  # a check's failure is its result, not the script's
        row = {"passed": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc()[-3000:]}
    row["seconds"] = round(time.perf_counter() - t0, 2)
    results[name] = row
    print(f"{name}: {'PASS' if row['passed'] else 'FAIL'} ({row['seconds']} s)", file=sys.stderr, flush=True)


def device_hsv(device: str = "cuda") -> dict[str, Any]:
    import torch

    from lucidyolo.data.device_hsv import hsv_jitter

    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (8, 3, 320, 320), generator=g).float()
    gains = (torch.rand(8, 3, generator=g) - 0.5) * torch.tensor([0.03, 1.4, 0.8])
    cpu = hsv_jitter(images, gains)
    cuda = hsv_jitter(images.to(device), gains.to(device)).cpu()
    diff = float((cpu - cuda).abs().max())
    return {"passed": diff <= 0.5, "max_abs_diff_of_255": diff}  # under half a level: same bytes after rounding


def objective(task: str, work: Path, device: str = "cuda") -> dict[str, Any]:
    import torch

    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.engine.loop.build import build_datamodule, build_system, dataset_meta, open_split
    from lucidyolo.structures.packed import unpack
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    root = spec.make_synthetic(work / f"obj-{task}", 16, 320, 0)
    cfg = resolve_config(spec, [], {"data": {"img_size": 320, "batch_size": 8, "num_workers": 0}})
    train = open_split(spec, cfg, root, "train", "train")
    val = open_split(spec, cfg, root, "val", "val")
    dm = build_datamodule(spec, cfg, train, val)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    system = build_system(spec, cfg, len(train.class_names), list(train.class_names), meta=dataset_meta(spec, train))
    system.train()

    def run(dev: str) -> tuple[float, dict[str, float], dict[str, Any]]:
        system.to(dev)
        images, gt, _ = unpack(batch, dev)
        total, terms = system.objective(images, gt, 0.5)
        total.backward()
        grads = {n: p.grad.detach().float().cpu().clone() for n, p in system.named_parameters() if p.grad is not None}
        system.zero_grad(set_to_none=True)
        return total.item(), {k: float(v) for k, v in terms.items()}, grads

    tc, terms_c, gc = run("cpu")
    row: dict[str, Any] = {"loss_cpu": tc, "terms_cpu": terms_c,
                           "nonfinite_grads_cpu": [n for n, g in gc.items() if not torch.isfinite(g).all()]}
    # TF32 (the CUDA default for convolutions on Ampere and later) against full float32 matmuls and convolutions
    for tf32 in (True, False):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        tg, terms_g, gg = run(device)
        bad = [n for n, g in gg.items() if not torch.isfinite(g).all()]
        diff = {n: float((gc[n] - gg[n]).norm()) for n in gc if n in gg and torch.isfinite(gg[n]).all()}
        norm = float(torch.cat([g.flatten() for g in gc.values()]).norm())
        rel = abs(tc - tg) / max(abs(tc), 1e-8)
        grad_rel = (sum(d * d for d in diff.values()) ** 0.5) / max(norm, 1e-12)
        row[f"tf32_{'on' if tf32 else 'off'}"] = {
            "loss_cuda": tg, "loss_rel_diff": rel, "grad_rel_diff": grad_rel if not bad else float("nan"),
            "nonfinite_grads": bad[:20], "largest_grad_diffs": sorted(diff.items(), key=lambda kv: -kv[1])[:6],
            "terms_cuda": terms_g,
        }
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    if row["nonfinite_grads_cpu"] or row["tf32_off"]["nonfinite_grads"]:
        # what it takes to reproduce offline: the weights and the batch (the --out folder comes back from a GPU lease)
        keep = (OUT_DIR or work) / f"nonfinite_{task}.pt"
        torch.save({"state_dict": system.state_dict(), "batch": unpack(batch, "cpu"), "torch": torch.__version__}, keep)
        row["reproduce_with"] = str(keep)
    off = row["tf32_off"]
    row["loss_rel_diff"], row["grad_rel_diff"] = off["loss_rel_diff"], off["grad_rel_diff"]
    row["passed"] = not off["nonfinite_grads"] and not row["nonfinite_grads_cpu"] and off["loss_rel_diff"] < 1e-3
    return row


_IMG_S = re.compile(r"\| ([0-9.]+) img/s \|")


def fit(task: str, work: Path, name: str, *extra: str, epochs: int = 2, accelerator: str = "gpu") -> dict[str, Any]:
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    root = work / f"fit-{task}"
    if not root.exists():
        spec.make_synthetic(root, 64, 320, 0)
    runs = work / "runs" / name
    args = [LUCID, "fit", task, "--data-root", str(root), "--data.img_size", "320", "--data.batch_size", "16",
            "--trainer.max_epochs", str(epochs), "--trainer.accelerator", accelerator, "--trainer.devices", "1",
            "--trainer.default_root_dir", str(runs), "--model.num_classes", "auto", *extra]
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, env={"COLUMNS": "250", **os.environ})
    wall = time.perf_counter() - t0
    rates = [float(m) for m in _IMG_S.findall(r.stdout)]
    done = [line for line in r.stdout.splitlines() if line.startswith("done:")]
    ckpt = runs / "version_0" / "checkpoints" / "last.ckpt"
    return {"passed": r.returncode == 0 and bool(done), "rc": r.returncode, "wall_s": round(wall, 1),
            "img_s_per_epoch": rates, "final": done[-1] if done else None, "checkpoint": str(ckpt),
            **({} if r.returncode == 0 else {"stderr": r.stderr[-3000:]})}


def command(*args: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = subprocess.run([LUCID, *args], capture_output=True, text=True, timeout=600, env={"COLUMNS": "250", **os.environ})
    return {"passed": r.returncode == 0, "rc": r.returncode, "wall_s": round(time.perf_counter() - t0, 1),
            "stdout_tail": r.stdout[-1500:], **({} if r.returncode == 0 else {"stderr": r.stderr[-3000:]})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--tasks", default="det,seg,obb,keypoints")
    parser.add_argument("--precisions", default="16-mixed,bf16-mixed")
    parser.add_argument("--checks", default="hsv,objective,fit,compiled,eval,ddp", help="groups to run, in this order")
    parser.add_argument("--compiled-epochs", type=int, default=2)
    args = parser.parse_args(argv)
    global OUT_DIR
    OUT_DIR = args.out.parent if args.out is not None else None
    import torch

    report: dict[str, Any] = {"benchmark": "gpu_check", "torch": torch.__version__}
    if not torch.cuda.is_available():
        report["skipped"] = "no CUDA device: nothing to check (run this on a machine with a GPU)"
        _emit(report, args.out)
        return 0
    report["gpu"] = torch.cuda.get_device_name(0)
    report["gpus"] = torch.cuda.device_count()
    results: dict[str, Any] = {}
    report["results"] = results
    work = Path(tempfile.mkdtemp(prefix="lucid-gpu-check-"))

    def check(results: dict[str, Any], name: str, body: Callable[[], dict[str, Any]]) -> None:
        run_check(results, name, body)
        if args.out is not None:  # what has run so far survives a timeout
            args.out.write_text(json.dumps(report, indent=1))

    tasks = [t for t in args.tasks.split(",") if t]
    groups = set(args.checks.split(","))
    try:
        if "hsv" in groups:
            check(results, "device_hsv", device_hsv)
        if "objective" in groups:
            for task in tasks:
                check(results, f"objective_{task}", lambda t=task: objective(t, work))
        if "fit" in groups:
            for task in tasks:
                for precision in args.precisions.split(","):
                    check(results, f"fit_{task}_{precision}",
                          lambda t=task, p=precision: fit(t, work, f"{t}-{p}", "--trainer.precision", p))
        if "compiled" in groups:
            check(results, "fit_det_compiled_device_hsv",
                  lambda: fit("det", work, "det-compiled", "--model.compile_step", "true", "--data.device_hsv", "true",
                              epochs=args.compiled_epochs))
        trained = [r["checkpoint"] for r in results.values() if r.get("passed") and r.get("checkpoint")]
        if "eval" in groups and trained and Path(trained[0]).is_file():
            images = next(p for p in (work / "fit-det").rglob("*.jpg"))
            check(results, "eval_det_cuda", lambda: command("eval", "--checkpoint", trained[0], "--device", "cuda",
                                                             "--img-size", "320"))
            check(results, "predict_det_cuda", lambda: command("predict", "--checkpoint", trained[0], "--device", "cuda",
                                                                "--source", str(images.parent), "--conf", "0.01"))
        if "ddp" in groups and torch.cuda.device_count() >= 2:
            check(results, "ddp_det_2gpu", lambda: fit("det", work, "det-ddp", "--trainer.devices", "2",
                                                       "--trainer.strategy", "ddp"))
        elif "ddp" in groups:
            results["ddp_det_2gpu"] = {"passed": None, "skipped": "one GPU"}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["passed"] = all(r.get("passed") is not False for r in results.values())
    _emit(report, args.out)
    return 0 if report["passed"] else 1


def _emit(report: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(report, indent=1)
    print(text)
    if out is not None:
        out.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
