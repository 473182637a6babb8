"""What a smoke fit's run folder must hold of batch pictures, checked as whole JPEG files (shared by the task CLI tests)."""

from __future__ import annotations

import math
import re
from pathlib import Path


def batch_picture_sizes(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Every batch picture of a run folder, each decoded to its last byte (a truncated file fails): name -> size."""
    from PIL import Image

    sizes = {}
    for path in sorted([*run_dir.glob("train_batch*.jpg"), *run_dir.glob("val_batch*.jpg")]):
        with Image.open(path) as im:
            assert im.format == "JPEG", path
            im.load()
            sizes[path.name] = im.size
    return sizes


def expected_batch_pictures(stdout: str, batch_size: int, plot_batches: int = 3) -> set[str]:
    """The names a fit writes: the first ``plot_batches`` training batches, and as many validation batches (labels
    and predictions), counted from the fit's "N train / M val images" line (a short last batch is kept)."""
    train, val = (int(v) for v in re.search(r"(\d+) train / (\d+) val images", stdout).groups())
    n_train, n_val = (min(plot_batches, math.ceil(n / batch_size)) for n in (train, val))
    return {f"train_batch{i}.jpg" for i in range(n_train)} | {
        f"val_batch{i}_{kind}.jpg" for i in range(n_val) for kind in ("labels", "pred")
    }
