"""Run ``lucid fit`` in 1 process at batch 8 or 2 gloo CPU processes at batch 4 and compare what they end with."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

SETTINGS = (
    "--trainer.accelerator",
    "cpu",
    "--trainer.max_epochs",
    "1",
    "--data.img_size",
    "128",
    "--data.synthetic_images",
    "32",
    "--data.num_workers",
    "0",
    "--ema.enabled",
    "false",
    "--trainer.precision",
    "32-true",
    "--seed",
    "0",
    "--trainer.limit_train_batches",
    "1",
    "--trainer.limit_val_batches",
    "1",
)
"""One optimizer step on 8 training images (26 in the split: full global batches only), float32, no EMA."""


def fit(lucid: Any, task: str, root: Path, processes: int, *extra: str) -> Path:
    """The run folder of a 1-process (batch 8) or 2-process (batch 4 each) fit of ``task`` under ``root``."""
    shape = (
        ("--data.batch_size", "8")
        if processes == 1
        else ("--data.batch_size", "4", "--trainer.devices", "2", "--trainer.strategy", "ddp")
    )
    r = lucid(
        "fit",
        task,
        *SETTINGS,
        *shape,
        *extra,
        "--trainer.default_root_dir",
        str(root),
        env={"LUCIDYOLO_CACHE_DIR": str(root.parent / "cache")},
        cwd=root.parent,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return root / "version_0"


def differences(a: Path, b: Path) -> dict[str, float]:
    """Largest |difference| of the trained weights and of the BatchNorm running statistics, largest relative
    difference of the epoch's training loss terms, between two run folders."""
    import torch

    sa, sb = (
        torch.load(p / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)[
            "state_dict"
        ]
        for p in (a, b)
    )
    floats = [k for k in sa if sa[k].is_floating_point()]
    la, lb = (
        list(csv.DictReader((p / "results.csv").read_text().splitlines()))[-1] for p in (a, b)
    )
    terms = [k for k in la if k.startswith("train/") and k.endswith("_loss")]
    return {
        "weights": max((sa[k] - sb[k]).abs().max().item() for k in floats if "running" not in k),
        "running": max((sa[k] - sb[k]).abs().max().item() for k in floats if "running" in k),
        "loss": max(abs(float(la[k]) - float(lb[k])) / abs(float(la[k])) for k in terms),
    }
