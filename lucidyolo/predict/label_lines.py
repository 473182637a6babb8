"""YOLO-format label lines with a confidence column (``lucid predict --save-txt``), shared by the tasks' hooks.

A line is ``label v1 v2 ... vn conf``: the class index, the row's values as the
task's YOLO reader reads them (normalised by the image size), then the row's
confidence. Dropping the last column gives a label file the same reader takes
for training (pseudo-labels), so every row rule lives with its task and this
module only formats numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

COORD_DECIMALS = 6
"""Normalised coordinates to 1e-6: under a thousandth of a pixel on a 640 px side, yet short lines."""


def normalise_xy(points: np.ndarray, image_hw: tuple[int, int]) -> np.ndarray:
    """``(..., 2)`` ``x, y`` pixels -> fractions of the image width / height."""
    h, w = image_hw
    return np.asarray(points, np.float64) / np.array([w, h], np.float64)


def xyxy_to_cxcywh_normalised(boxes: np.ndarray, image_hw: tuple[int, int]) -> np.ndarray:
    """``(N, 4)`` xyxy pixels -> ``(N, 4)`` ``cx, cy, w, h`` normalised (a YOLO box row)."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    centre = normalise_xy((b[:, :2] + b[:, 2:]) / 2, image_hw)  # (N, 2)
    size = normalise_xy(b[:, 2:] - b[:, :2], image_hw)  # (N, 2)
    return np.concatenate([centre, size], axis=1)


def format_line(label: int, values: Sequence[float] | np.ndarray, conf: float) -> str:
    """``"label v1 ... vn conf"``: values to :data:`COORD_DECIMALS` decimals, the confidence as given (``:g``)."""
    coords = [f"{float(v):.{COORD_DECIMALS}f}" for v in np.asarray(values, np.float64).ravel()]
    return " ".join([str(int(label)), *coords, f"{float(conf):g}"])


def box_lines(predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int]) -> list[str]:
    """``label cx cy w h conf`` per predict dict (``"box"`` xyxy pixels, ``"label"``, ``"score"``): the YOLO
    detection row, normalised by ``image_hw = (h, w)``, plus the confidence."""
    boxes = xyxy_to_cxcywh_normalised(np.array([p["box"] for p in predictions], np.float64).reshape(-1, 4), image_hw)
    return [format_line(int(p["label"]), b, float(p["score"])) for p, b in zip(predictions, boxes, strict=True)]
