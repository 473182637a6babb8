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

Usage: ``python benchmarks/plot_overhead.py [--pairs 3] [--epochs N] [--extra "--data.batch_size 8"]``
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--pairs", type=int, default=3, help="off/on pairs, the order swapped every pair"
    )
    ap.add_argument(
        "--epochs", type=int, default=None, help="--trainer.max_epochs (default: the run's own)"
    )
    ap.add_argument("--extra", default="", help="more options for both arms")
    a = ap.parse_args()
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
