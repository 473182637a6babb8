"""Repeated label rows: the same class and coordinates twice (or a million times) in one image's labels.

A label file whose rows were appended twice by a broken export, or one row
written a million times, reads without error: each copy is an object to find.
Training then piles identical targets on one spot and evaluation counts every
copy as a missed object. ``lucid fit`` logs :func:`duplicate_rows_warning` for
its training split and ``lucid data check`` reports it for every split.

Numpy only, like the readers (no torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lucidyolo.data.source import ImageSource

#: Files a warning names (the most repeated first).
_EXAMPLES = 3


def duplicate_rows_per_image(src: ImageSource) -> np.ndarray:
    """``(N_images,)`` int64: rows of each image's labels that repeat another row of the same image.

    Two rows are the same when the class and every coordinate of the split's
    fields match exactly (boxes, and rotated boxes, keypoints and visibility
    where the split has them; a polygon by its vertex count and coordinate
    sums). One ``np.unique`` over all rows of the split: a million rows take
    well under a second.
    """
    targets, image_index = src.all_instances()
    m = len(image_index)
    if m == 0:
        return np.zeros(len(src), np.int64)
    columns = [image_index[:, None].astype(np.float64), targets.labels[:, None].astype(np.float64),
               targets.boxes.astype(np.float64)]
    for value in targets.extra.values():
        if isinstance(value, np.ndarray) and value.ndim >= 1 and len(value) == m:
            columns.append(value.reshape(m, -1).astype(np.float64))
        elif hasattr(value, "ring_owner") and hasattr(value, "points"):  # Polygons: ragged, summarised per owner
            per_point = np.repeat(value.ring_owner, np.diff(value.ring_offsets))
            pts = value.points.astype(np.float64)
            columns.append(np.stack([np.bincount(per_point, minlength=m), np.bincount(per_point, pts[:, 0], m),
                                     np.bincount(per_point, pts[:, 1], m)], axis=1).astype(np.float64))
    rows = np.concatenate(columns, axis=1)
    distinct = np.unique(rows, axis=0)
    per_image = np.bincount(image_index, minlength=len(src))
    distinct_per_image = np.bincount(distinct[:, 0].astype(np.int64), minlength=len(src))
    return (per_image - distinct_per_image).astype(np.int64)


def duplicate_rows_warning(src: ImageSource) -> str | None:
    """A warning naming the label files (or images) with repeated rows and how many, else ``None``."""
    dupes = duplicate_rows_per_image(src)
    where = np.flatnonzero(dupes)
    if where.size == 0:
        return None
    order = where[np.argsort(-dupes[where], kind="stable")]
    shown = ", ".join(f"{_label_file(src, int(i))} ({int(dupes[i])} duplicate rows)" for i in order[:_EXAMPLES])
    more = f" and {where.size - _EXAMPLES} more file(s)" if where.size > _EXAMPLES else ""
    return (
        f"{int(dupes.sum())} label row(s) repeat another row of the same image exactly (same class and coordinates), "
        f"in {where.size} file(s): {shown}{more}. Each copy counts as one more object: training piles identical "
        "targets on one spot and evaluation counts every copy as an object to find. Remove the repeated rows "
        "(for a YOLO label file, `sort -u FILE`)."
    )


def _label_file(src: ImageSource, i: int) -> Path | str:
    """Where image ``i``'s rows were read: its YOLO label file, else the image (in the annotation file)."""
    image = src.image_path(i)
    if src.layout == "yolo":
        from lucidyolo.data.yolo import label_path_for

        return label_path_for(image)
    return f"{image} in {src.ann_file}" if src.ann_file is not None else image
