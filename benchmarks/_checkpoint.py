"""A det checkpoint for the inference benchmarks: one epoch of ``lucid fit det`` on a small synthetic set.

Latency does not depend on what the weights learned, only on the graph, so a
one-epoch nano checkpoint stands in for a trained one (the detections it keeps
at a threshold differ, which the per-image JSON cost barely feels).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def det_checkpoint(work: Path, variant: str = "n") -> Path:
    """Train one epoch into ``work`` (once) and return ``last.ckpt``."""
    ckpt = work / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    if ckpt.is_file():
        return ckpt
    lucid = str(Path(sys.executable).parent / "lucid")
    subprocess.run([lucid, "data", "synth", "--out", str(work / "data"), "--images", "16", "--img-size", "320"],
                   check=True, capture_output=True)
    subprocess.run([lucid, "fit", "det", "--data-root", str(work / "data"), "--model.variant", variant,
                    "--trainer.max_epochs", "1", "--data.img_size", "320", "--data.batch_size", "8",
                    "--trainer.default_root_dir", str(work / "runs")], check=True, capture_output=True)
    return ckpt
