"""A det checkpoint for the inference benchmarks: a short ``lucid fit det`` on a small synthetic set or on the data to score.

Latency does not depend on what the weights learned, only on the graph, so a
short nano run stands in for a trained one (the detections it keeps
at a threshold differ, which the per-image JSON cost barely feels).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def det_checkpoint(work: Path, variant: str = "n", data_root: Path | None = None) -> Path:
    """Train into ``work`` (once) and return ``last.ckpt``.

    Without ``data_root``: one epoch on 16 synthetic images. With it: two
    training batches and no validation on that root, so the checkpoint has
    its class names (``lucid eval`` refuses another label space).
    """
    ckpt = work / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    if ckpt.is_file():
        return ckpt
    lucid = str(Path(sys.executable).parent / "lucid")
    extra: list[str] = []
    if data_root is None:
        data_root = work / "data"
        subprocess.run([lucid, "data", "synth", "--out", str(data_root), "--images", "16", "--img-size", "320"],
                       check=True, capture_output=True)
    else:
        extra = ["--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "0", "--data.val_split", "train"]
    subprocess.run([lucid, "fit", "det", "--data-root", str(data_root), "--model.variant", variant,
                    "--trainer.max_epochs", "1", "--data.img_size", "320", "--data.batch_size", "8",
                    "--trainer.default_root_dir", str(work / "runs"), *extra], check=True, capture_output=True)
    return ckpt
