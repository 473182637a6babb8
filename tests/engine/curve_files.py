"""Checks shared by the smoke fits: a run folder (or ``lucid eval --plots`` folder) holds valid curve files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

CURVE_PNGS = (
    "pr_curve",
    "f1_curve",
    "p_curve",
    "r_curve",
    "confusion_matrix",
    "confusion_matrix_normalized",
)


def assert_curve_files(folder: Path, prefix: str) -> dict[str, Any]:
    """Every PNG of ``prefix`` decodes; the JSON's confusion matrix and PR curves are consistent. Returns the JSON."""
    from PIL import Image

    for name in CURVE_PNGS:
        path = folder / f"{prefix}_{name}.png"
        assert path.is_file(), path
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            assert im.format == "PNG" and min(im.size) >= 200, (path, im.size)
    data = json.loads((folder / f"{prefix}_curves.json").read_text())
    c = len(data["names"])
    cm = np.asarray(data["confusion_matrix"])
    assert cm.shape == (c + 1, c + 1) and (cm >= 0).all()
    # every true-class row accounts for each ground truth once (no confusion outnumbers the misses here)
    assert cm[:c].sum(axis=1).tolist() == [p["num_gt"] for p in data["per_class"]]
    assert len(data["pr_recall"]) == 101 and len(data["pr_precision"]) == c
    for row, cls in zip(data["pr_precision"], data["per_class"], strict=True):
        if cls["ap"] is not None:
            assert (
                abs(float(np.mean(row)) - cls["ap"]) < 1e-9
            )  # the drawn curve's area is the class AP
    return data
