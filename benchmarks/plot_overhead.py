"""What the run folder's pictures cost: the embedded default run with and without them; prints ONE JSON line.

Issue 31 item 6 asks that plots and images add under 5 % to the wall time of
``lucid fit det`` on the embedded synthetic set at its defaults. This runs the
real console script, as a user types it, in pairs: ``--data.plot_batches 0``
(arm ``off``: no batch pictures) and the default (arm ``on``). The machine is
shared and its load drifts, so the arms are interleaved and every pair swaps
the order of the one before (off/on, on/off, ...): a slow patch of the machine
falls on both arms alike, and a drift across a pair cancels over two pairs.
A first, untimed one-epoch run writes the synthetic set into the cache both
arms then read.

Reports each run's wall time (process start to exit), its CPU time (user +
system of the process and its children: less moved by other users of the
machine than the wall time, and what the pictures themselves cost) and the
fit's own elapsed time (its last epoch line: start-up excluded), the per-pair
ratios on / off and their medians; ``overhead_pct`` is ``100 * (median wall
ratio - 1)``.

``--direct`` measures the pictures' own cost instead, where a loaded machine
drowns the difference of two whole runs (measured: the same command took 85 s
and 504 s within the hour): one fit in this process, the embedded default at
``--epochs``, with the picture callback's work timed where it runs, the
main-thread hooks (the copies and the validation forward passes) by the wall
clock and the background drawing by its thread's CPU clock. That cost is fixed
per run, so it is set against the default run's 20 epochs, each as long as
this fit's median epoch: the hooks' wall time against the epochs' wall time,
the drawing thread's CPU time against the CPU time the training process spends
per epoch (a loaded machine stretches wall times, not CPU times); both measured
in the same process at the same time (``projected_overhead_pct``).

Usage: ``python benchmarks/plot_overhead.py [--pairs 3] [--epochs N] [--extra "--data.batch_size 8"] [--direct]``
(``--epochs`` left out: the embedded default's own 20).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def lucid_command() -> list[str]:
    """The console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("lucid")
    return [str(script)] if script.exists() else [sys.executable, "-m", "lucidyolo"]


def clock_seconds(text: str) -> float:
    """``m:ss`` or ``h:mm:ss`` -> seconds."""
    total = 0.0
    for part in text.split(":"):
        total = total * 60 + float(part)
    return total


def fit_once(work: Path, cache: Path, args: list[str], tag: str) -> dict[str, float | str]:
    """One ``lucid fit det`` in its own folder; its wall time and the fit's own elapsed time."""
    root = work / tag
    env = {**os.environ, "LUCIDYOLO_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(
        [*lucid_command(), "fit", "det", *args, "--trainer.default_root_dir", str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise SystemExit(
            f"lucid fit det {' '.join(args)} failed ({r.returncode}):\n{r.stderr[-3000:]}"
        )
    elapsed = re.findall(r"^epoch \d+/\d+ \|.*\| (\S+) elapsed", r.stdout, re.M)
    pictures = sorted(p.name for p in (root / "version_0").glob("*_batch*.jpg"))
    shutil.rmtree(root, ignore_errors=True)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "fit_s": clock_seconds(elapsed[-1]) if elapsed else float("nan"),
        "pictures": len(pictures),
    }


DEFAULT_EPOCHS = 20
"""``trainer.max_epochs`` of the embedded default run (det_nano_synthetic.yaml)."""


def direct(epochs: int, extra: dict[str, object]) -> dict[str, object]:
    """One in-process fit of the embedded default with the picture callback's work timed (see the docstring)."""
    import functools
    import threading

    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.engine.loop.fit import run_fit
    from lucidyolo.engine.run import batch_images
    from lucidyolo.tasks.registry import get_task

    spent = {"main_s": 0.0, "thread_cpu_s": 0.0, "pictures": 0}
    lock = threading.Lock()

    def timed(fn, key, clock):  # type: ignore[no-untyped-def]
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    spent[key] += clock() - t0
                    if key == "thread_cpu_s":
                        spent["pictures"] += 1

        return wrapper

    cls = batch_images.BatchImages
    for name in ("on_train_batch_start", "on_validation_batch_end"):
        setattr(cls, name, timed(getattr(cls, name), "main_s", time.perf_counter))
    for name in ("_write_labels", "_write_predictions"):
        setattr(cls, name, timed(getattr(cls, name), "thread_cpu_s", time.thread_time))
    spec = get_task("det")
    with tempfile.TemporaryDirectory(prefix="lucid-plot-overhead-") as tmp:
        os.environ.setdefault("LUCIDYOLO_CACHE_DIR", str(Path(tmp) / "cache"))
        overrides = {
            "trainer": {"max_epochs": epochs, "default_root_dir": str(Path(tmp) / "runs")},
            **extra,
        }
        cfg = resolve_config(spec, [spec.synthetic_preset], overrides, None, get_task=get_task)
        epoch_ends: list[tuple[float, float]] = []  # (wall, this process's CPU) at each epoch line

        def log(line: str) -> None:
            if line.startswith("epoch "):
                epoch_ends.append((time.perf_counter(), time.process_time()))

        t0 = time.perf_counter()
        run_fit(spec, cfg, log=log)
        wall = time.perf_counter() - t0
    # epoch to epoch (the first pays the start-up); the median leaves out the last, whose validation is drawn
    walls = [b[0] - a[0] for a, b in zip(epoch_ends, epoch_ends[1:], strict=False)] or [wall]
    cpus = [b[1] - a[1] for a, b in zip(epoch_ends, epoch_ends[1:], strict=False)] or [
        time.process_time()
    ]
    epoch_wall, epoch_cpu = statistics.median(walls), statistics.median(cpus)
    # the hooks' wall time against the epochs' wall time; the drawing thread's CPU time against the CPU time
    # the training process spends per epoch (all its threads): a loaded machine stretches wall times, not CPU
    main_share = spent["main_s"] / (DEFAULT_EPOCHS * epoch_wall)
    thread_share = spent["thread_cpu_s"] / (DEFAULT_EPOCHS * epoch_cpu)
    return {
        "benchmark": "plot_overhead --direct",
        "epochs": epochs,
        "fit_wall_s": round(wall, 2),
        "epoch_wall_s": round(epoch_wall, 2),
        "epoch_process_cpu_s": round(epoch_cpu, 2),
        "pictures": spent["pictures"],
        "main_thread_s": round(spent["main_s"], 3),
        "drawing_thread_cpu_s": round(spent["thread_cpu_s"], 3),
        "default_epochs": DEFAULT_EPOCHS,
        "projected_overhead_pct": round(100 * (main_share + thread_share), 2),
        "projected_main_thread_pct": round(100 * main_share, 2),
        "projected_drawing_pct": round(100 * thread_share, 2),
        "cpu_count": os.cpu_count(),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--pairs", type=int, default=3, help="off/on pairs, the order swapped every pair"
    )
    ap.add_argument(
        "--epochs", type=int, default=None, help="--trainer.max_epochs (default: the run's own)"
    )
    ap.add_argument("--extra", default="", help="more options for both arms")
    ap.add_argument(
        "--direct", action="store_true", help="time the pictures' own work in one in-process fit"
    )
    a = ap.parse_args()
    if a.direct:
        print(json.dumps(direct(a.epochs or 3, {})))
        return
    common = shlex.split(a.extra) + (["--trainer.max_epochs", str(a.epochs)] if a.epochs else [])
    arms = {"off": [*common, "--data.plot_batches", "0"], "on": common}
    with tempfile.TemporaryDirectory(prefix="lucid-plot-overhead-") as tmp:
        work, cache = Path(tmp), Path(tmp) / "cache"
        fit_once(
            work, cache, [*arms["off"], "--trainer.max_epochs", "1"], "warm-up"
        )  # writes the synthetic set
        runs: list[dict[str, float | str]] = []
        ratios, fit_ratios, cpu_ratios = [], [], []
        for p in range(a.pairs):
            order = ("off", "on") if p % 2 == 0 else ("on", "off")
            got = {}
            for arm in order:
                got[arm] = fit_once(work, cache, arms[arm], f"{p}-{arm}")
                runs.append({"pair": p, "arm": arm, **got[arm]})
            ratios.append(float(got["on"]["wall_s"]) / float(got["off"]["wall_s"]))
            fit_ratios.append(float(got["on"]["fit_s"]) / float(got["off"]["fit_s"]))
            cpu_ratios.append(float(got["on"]["cpu_s"]) / float(got["off"]["cpu_s"]))
    median = statistics.median(ratios)
    print(
        json.dumps(
            {
                "benchmark": "plot_overhead",
                "command": "lucid fit det " + " ".join(common),
                "pairs": a.pairs,
                "runs": runs,
                "wall_ratios_on_off": [round(r, 4) for r in ratios],
                "fit_ratios_on_off": [round(r, 4) for r in fit_ratios],
                "median_wall_ratio": round(median, 4),
                "median_fit_ratio": round(statistics.median(fit_ratios), 4),
                "cpu_ratios_on_off": [round(r, 4) for r in cpu_ratios],
                "median_cpu_ratio": round(statistics.median(cpu_ratios), 4),
                "overhead_pct": round(100 * (median - 1), 2),
                # the pictures cost a fixed amount per run (first epoch's training batches, first and last validation):
                # the seconds they add, to set against a run of any length
                "added_wall_s": round(
                    statistics.median(float(r["wall_s"]) for r in runs if r["arm"] == "on")
                    - statistics.median(float(r["wall_s"]) for r in runs if r["arm"] == "off"),
                    2,
                ),
                "added_cpu_s": round(
                    statistics.median(float(r["cpu_s"]) for r in runs if r["arm"] == "on")
                    - statistics.median(float(r["cpu_s"]) for r in runs if r["arm"] == "off"),
                    2,
                ),
                "cpu_count": os.cpu_count(),
                "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
