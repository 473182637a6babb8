"""The YOLO row rules of the built-in fields: polygon, rotated-box (4 corners) and pose rows.

All numbers are normalised by the image size. Corners and polygon vertices
slightly outside ``[0, 1]`` (objects cut by a tile edge) are clipped to the
image, not refused. A pose row is ``cx cy w h`` followed by K points of
``x y`` or ``x y v`` (``kpt_shape: [K, 2|3]`` in ``data.yaml``; without a
visibility column a labelled, non-zero point counts as visible).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.errors import DataError
from lucidyolo.structures.field_io import YoloRows, cxcywh_to_xyxy, stack_rows, xyxy_to_cxcywh
from lucidyolo.structures.geometry import corners_to_rbox, corners_to_xyxy, rbox_to_corners
from lucidyolo.structures.polygons import Polygons


def _scale(hw: tuple[int, int]) -> np.ndarray:
    return np.array([hw[1], hw[0]], np.float64)


# ------------------------------------------------------------------- polygons
def _polygon_read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    scale = _scale(hw)
    rings = [np.clip(r.reshape(-1, 2) * scale, 0, scale) for r in rows]
    boxes = np.stack([np.concatenate([q.min(0), q.max(0)]) for q in rings]) if rings else np.zeros((0, 4))
    return boxes, {"polygons": Polygons.from_rings(rings, list(range(len(rings))))}


def _polygon_write(values: Mapping[str, Any], boxes: np.ndarray, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    """One row per instance: its first ring (a YOLO row holds one outline)."""
    p: Polygons = values["polygons"]
    owner = p.ring_owner
    first = {int(o): r for r, o in reversed(list(enumerate(owner)))}
    scale = _scale(hw)
    return [(p.ring(first[i]) / scale).reshape(-1).tolist() for i in range(len(boxes))]


POLYGON_ROWS = YoloRows(
    kind="polygon",
    need=lambda meta: "1 + 2k fields with k >= 3 (c x1 y1 ... xk yk)",
    accepts=lambda count, meta: count >= 6 and count % 2 == 0,
    read=_polygon_read,
    write=_polygon_write,
)


# --------------------------------------------------------------------- rboxes
def _rbox_read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    scale = _scale(hw)
    c = np.clip(stack_rows(rows, 8).reshape(-1, 4, 2) * scale, 0, scale)  # tile-cut corners: clip, do not reject
    return corners_to_xyxy(c), {"rboxes": corners_to_rbox(c)}


def _rbox_write(values: Mapping[str, Any], boxes: np.ndarray, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    return (rbox_to_corners(values["rboxes"]) / _scale(hw)).reshape(-1, 8).tolist()


RBOX_ROWS = YoloRows(
    kind="rbox",
    need=lambda meta: "9 fields (c x1 y1 x2 y2 x3 y3 x4 y4)",
    accepts=lambda count, meta: count == 8,
    read=_rbox_read,
    write=_rbox_write,
)


# ------------------------------------------------------------------ keypoints
def _pose_meta(yaml: Mapping[str, Any], yaml_path: Path) -> dict[str, Any]:
    """``num_keypoints`` and ``kpt_dims`` from ``kpt_shape``, ``flip_idx`` when given (an involution of 0..K-1)."""
    ks = yaml.get("kpt_shape")
    if ks is None:
        raise DataError(f"{yaml_path} has no kpt_shape, so it cannot be read for a keypoint task.",
                        fix="Add `kpt_shape: [K, 3]` (and flip_idx) or pick another task.")
    if not (isinstance(ks, list) and len(ks) == 2 and int(ks[0]) > 0 and int(ks[1]) in (2, 3)):
        raise DataError(f"{yaml_path}: kpt_shape {ks!r} must be [K, 2] or [K, 3].")
    k, dims = int(ks[0]), int(ks[1])
    fi = yaml.get("flip_idx")
    if fi is not None:
        fi = [int(i) for i in fi]
        if sorted(fi) != list(range(k)):
            raise DataError(f"{yaml_path}: flip_idx {fi} is not a permutation of 0..{k - 1}.")
        if any(fi[fi[i]] != i for i in range(len(fi))):
            raise DataError(f"{yaml_path}: flip_idx {fi} is not its own inverse (left<->right pairs).")
    return {"num_keypoints": k, "kpt_dims": dims, "flip_idx": fi}


def _pose_width(meta: Mapping[str, Any]) -> int:
    return 4 + int(meta["num_keypoints"]) * int(meta["kpt_dims"])


def _pose_read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    k, dims = int(meta["num_keypoints"]), int(meta["kpt_dims"])
    r = stack_rows(rows, _pose_width(meta))
    bad = np.flatnonzero((r[:, 2] < 0) | (r[:, 3] < 0))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{where[i]}: negative box size w={r[i, 2]:g} h={r[i, 3]:g}.", fix="Fix or remove the row.")
    kd = r[:, 4:].reshape(-1, k, dims)
    # no visibility column: a labelled (non-zero) point counts as visible
    vis = kd[..., 2] if dims == 3 else np.where(np.any(kd[..., :2] != 0, axis=-1), 2.0, 0.0)
    return cxcywh_to_xyxy(r[:, :4], hw), {"keypoints": kd[..., :2] * _scale(hw), "visibility": vis}


def _pose_write(values: Mapping[str, Any], boxes: np.ndarray, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    """``cx cy w h`` + K x ``(x, y, v)`` when the data has a visibility column, else K x ``(x, y)``."""
    kp = np.asarray(values["keypoints"], np.float64) / _scale(hw)
    parts = [kp] if int(meta.get("kpt_dims", 3)) == 2 else [kp, np.asarray(values["visibility"], np.float64)[..., None]]
    points = np.concatenate(parts, -1).reshape(len(kp), -1)
    return np.concatenate([xyxy_to_cxcywh(boxes, hw), points], 1).tolist()


POSE_ROWS = YoloRows(
    kind="pose",
    need=lambda meta: f"{_pose_width(meta) + 1} fields (c cx cy w h + {meta['num_keypoints']} x {meta['kpt_dims']})",
    accepts=lambda count, meta: count == _pose_width(meta),
    read=_pose_read,
    write=_pose_write,
    meta=_pose_meta,
    declares=lambda yaml: yaml.get("kpt_shape") is not None,
)
