"""The ``keypoints`` field of the keypoint task: K points and their visibility per instance.

Its geometry (affine map; the flip swaps left and right points by the dataset's
``flip_idx`` and is refused without it), the clip that marks points outside the
visible region absent, its batch tensors, its YOLO row (``cx cy w h`` + K x
``(x, y[, v])``; K, the row width and ``flip_idx`` from ``data.yaml``'s
``kpt_shape``), its COCO rule (``person_keypoints``: ``x, y, v`` triplets; K,
flip pairs and skeleton from the categories) and its synthetic scene. Numpy
only: the rules run in loader workers. Found through the ``lucidyolo.fields``
entry point (importing it registers it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.errors import DataError
from lucidyolo.structures.field_io import (
    CocoRule,
    YoloRows,
    cxcywh_to_xyxy,
    stack_rows,
    xy_scale,
    xyxy_to_cxcywh,
)
from lucidyolo.structures.fields import AttrSpec, FieldSpec, Values, pad_rows, register_field
from lucidyolo.structures.geometry import affine_points


# ------------------------------------------------------------------ geometry and batch tensors
def _keypoints_affine(v: Values, m: np.ndarray) -> Values:
    return {"keypoints": affine_points(v["keypoints"], m), "visibility": v["visibility"]}


def _keypoints_flip(v: Values, right: float, meta: Mapping[str, Any]) -> Values:
    flip_idx = meta.get("flip_idx")
    if flip_idx is None:
        raise ValueError("keypoints cannot be flipped without flip_idx")
    idx = np.asarray(flip_idx, dtype=np.int64)
    kp = v["keypoints"].copy()
    kp[..., 0] = right - kp[..., 0]
    vis = v["visibility"]
    return {"keypoints": kp[:, idx], "visibility": None if vis is None else vis[:, idx]}


def _keypoints_can_flip(meta: Mapping[str, Any]) -> bool:
    return meta.get("flip_idx") is not None


def _keypoints_clip(v: Values, region: tuple[float, float, float, float]) -> Values:
    kp, vis = v["keypoints"], v["visibility"]
    if kp is None or vis is None or not kp.size:
        return v
    inside = (kp[..., 0] >= region[0]) & (kp[..., 0] < region[2]) & (kp[..., 1] >= region[1]) & (kp[..., 1] < region[3])
    return {"keypoints": kp, "visibility": np.where(inside, vis, 0.0).astype(np.float32)}  # points kept, marked absent


def _pack_keypoints(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    k = next((v["keypoints"].shape[1] for v in values if v["keypoints"] is not None), 0)
    kp = [np.zeros((int(c), k, 2), np.float32) if v["keypoints"] is None else v["keypoints"] for v, c in zip(values, counts, strict=True)]
    vis = [np.zeros((int(c), k), np.float32) if v["visibility"] is None else v["visibility"] for v, c in zip(values, counts, strict=True)]
    return {
        "keypoints": np.concatenate(kp or [np.zeros((0, k, 2), np.float32)]).astype(np.float32).reshape(-1, k, 2),
        "visibility": np.concatenate(vis or [np.zeros((0, k), np.float32)]).astype(np.float32).reshape(-1, k),
    }


def _unpack_keypoints(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {
        "keypoints": pad_rows(t["keypoints"], image_of, slot, batch, m),
        "visibility": pad_rows(t["visibility"], image_of, slot, batch, m),
    }


# ------------------------------------------------------------------ YOLO row: box + K points
def _yaml_meta(yaml: Mapping[str, Any], yaml_path: Path) -> dict[str, Any]:
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


def _row_width(meta: Mapping[str, Any]) -> int:
    return 4 + int(meta["num_keypoints"]) * int(meta["kpt_dims"])


def _row_read(rows: Sequence[np.ndarray], hw: tuple[int, int], meta: Mapping[str, Any], where: Sequence[str]) -> tuple[np.ndarray, dict[str, Any]]:
    k, dims = int(meta["num_keypoints"]), int(meta["kpt_dims"])
    r = stack_rows(rows, _row_width(meta))
    bad = np.flatnonzero((r[:, 2] < 0) | (r[:, 3] < 0))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{where[i]}: negative box size w={r[i, 2]:g} h={r[i, 3]:g}.", fix="Fix or remove the row.")
    kd = r[:, 4:].reshape(-1, k, dims)
    # no visibility column: a labelled (non-zero) point counts as visible
    vis = kd[..., 2] if dims == 3 else np.where(np.any(kd[..., :2] != 0, axis=-1), 2.0, 0.0)
    return cxcywh_to_xyxy(r[:, :4], hw), {"keypoints": kd[..., :2] * xy_scale(hw), "visibility": vis}


def _row_write(values: Mapping[str, Any], boxes: np.ndarray, hw: tuple[int, int], meta: Mapping[str, Any]) -> list[list[float]]:
    """``cx cy w h`` + K x ``(x, y, v)`` when the data has a visibility column, else K x ``(x, y)``."""
    kp = np.asarray(values["keypoints"], np.float64) / xy_scale(hw)
    parts = [kp] if int(meta.get("kpt_dims", 3)) == 2 else [kp, np.asarray(values["visibility"], np.float64)[..., None]]
    points = np.concatenate(parts, -1).reshape(len(kp), -1)
    return np.concatenate([xyxy_to_cxcywh(boxes, hw), points], 1).tolist()


POSE_ROWS = YoloRows(
    kind="pose",
    need=lambda meta: f"{_row_width(meta) + 1} fields (c cx cy w h + {meta['num_keypoints']} x {meta['kpt_dims']})",
    accepts=lambda count, meta: count == _row_width(meta),
    read=_row_read,
    write=_row_write,
    meta=_yaml_meta,
    declares=lambda yaml: yaml.get("kpt_shape") is not None,
)


# ------------------------------------------------------------------ COCO: person_keypoints
def keypoint_flip_idx(names: list[str]) -> list[int]:
    """Horizontal-flip permutation from ``left_*`` / ``right_*`` keypoint names.

    ``left_eye`` <-> ``right_eye``; names without a partner map to themselves.
    """
    index = {n: i for i, n in enumerate(names)}
    flip = list(range(len(names)))
    for i, n in enumerate(names):
        for a, b in (("left_", "right_"), ("right_", "left_"), ("l_", "r_"), ("r_", "l_")):
            if n.startswith(a) and (b + n[len(a) :]) in index:
                flip[i] = index[b + n[len(a) :]]
                break
    return flip


def keypoint_skeleton(data: dict[str, Any], cat_ids: list[int], k: int | None) -> list[list[int]] | None:
    """The limbs of a pose file's first keypoint category as 0-based point pairs, or ``None`` when it declares none.

    COCO numbers the points of a ``skeleton`` pair from 1. A pair naming a point
    outside ``1..K`` is left out rather than refused: the skeleton is only drawn,
    and a schema's drawing is no reason to stop its training.
    """
    if not k or not cat_ids:
        return None
    cat = next((c for c in data["categories"] if int(c["id"]) == cat_ids[0]), {})
    pairs = cat.get("skeleton")
    if not isinstance(pairs, list):
        return None
    return [[int(p[0]) - 1, int(p[1]) - 1] for p in pairs
            if isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(v, int) and 1 <= v <= k for v in p)]


def _coco_categories(cats: list[dict[str, Any]], ann_file: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The categories that name keypoints (one schema), and K, flip pairs and skeleton of the lowest-id one."""
    cats = [c for c in cats if c.get("keypoints")]
    if not cats:
        raise DataError(
            f"{ann_file} declares no category with 'keypoints'.",
            why="pose training needs keypoint names (COCO person_keypoints_*.json).",
            fix="Use the person_keypoints_{split}.json file for pose, or another task.",
        )
    if len({tuple(c["keypoints"]) for c in cats}) != 1:
        raise DataError(f"{ann_file}: categories declare different keypoint lists.", fix="Use one keypoint schema per dataset.")
    first = min(cats, key=lambda c: int(c["id"]))
    names = list(first["keypoints"])
    k = len(names)
    return cats, {"num_keypoints": k, "flip_idx": keypoint_flip_idx(names),
                  "skeleton": keypoint_skeleton({"categories": [first]}, [int(first["id"])], k)}


def _coco_read(ann: Mapping[str, Any], hw: tuple[int, int], meta: Mapping[str, Any], crowd: bool, bad: Any) -> np.ndarray:
    k = int(meta["num_keypoints"])
    kp = np.asarray(ann.get("keypoints") or [0.0] * (3 * k), dtype=np.float32)
    if kp.size != 3 * k:
        raise bad(f"has {kp.size} keypoint numbers, expected {3 * k} (K={k} x 3).", "Write x, y, v for every keypoint.")
    return kp.reshape(k, 3)


def _coco_join(values: Sequence[np.ndarray], boxes: np.ndarray, meta: Mapping[str, Any]) -> dict[str, Any]:
    k = int(meta["num_keypoints"])
    kp3 = np.stack(values).astype(np.float32) if len(values) else np.zeros((0, k, 3), np.float32)
    return {"keypoints": kp3[..., :2].copy(), "visibility": kp3[..., 2].copy()}


def _coco_write(values: Mapping[str, Any], n: int, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    kp, vis = values.get("keypoints"), values.get("visibility")
    if kp is None or vis is None:
        return [{} for _ in range(n)]
    out = []
    for j in range(n):
        flat = np.concatenate([kp[j], vis[j][:, None]], 1).astype(np.float64)
        out.append({"keypoints": flat.reshape(-1).tolist(), "num_keypoints": int((vis[j] > 0).sum())})
    return out


POSE_COCO = CocoRule(
    read=_coco_read,
    join=_coco_join,
    categories=_coco_categories,
    ann_prefix="person_keypoints",
    write=_coco_write,
    write_category=lambda meta: {"keypoints": [f"kp{i}" for i in range(int(meta["num_keypoints"]))], "skeleton": []}
    if meta.get("num_keypoints") else {},
)


FIELD = FieldSpec(
    name="keypoints",
    attrs=(
        AttrSpec("keypoints", np.float32, (None, 2), meta_dims=("num_keypoints",)),
        AttrSpec("visibility", np.float32, (None,), meta_dims=("num_keypoints",)),
    ),
    packed=("keypoints", "visibility"),
    pack=_pack_keypoints, unpack=_unpack_keypoints,
    affine=_keypoints_affine, flip=_keypoints_flip, can_flip=_keypoints_can_flip, clip=_keypoints_clip,
    yolo=POSE_ROWS, coco=POSE_COCO,
    meta_keys=("num_keypoints", "flip_idx"),
    synth="lucidyolo.tasks.keypoints.synthetic:SCENE",
)
register_field(FIELD)
