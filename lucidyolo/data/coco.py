"""COCO JSON reader (instances and person_keypoints) for every field a task can read.

Reads one annotation file plus its image folder into an
:class:`~lucidyolo.data.source.ImageSource`. Category ids are sorted and
mapped to contiguous labels (``source.category_ids`` maps back). Crowd
annotations are excluded from the training targets; evaluation reads them
from ``source.ann_file`` (see :mod:`lucidyolo.data.coco_gt`). Boxes are
clamped to the image. The raw JSON is dropped once the compact arrays exist.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.data.rle_polygons import rle_to_rings
from lucidyolo.data.source import ImageSource, SourceBuilder
from lucidyolo.errors import DataError
from lucidyolo.structures.geometry import canonicalize_rboxes, min_area_rboxes_of_polygons
from lucidyolo.structures.targets import Polygons, Targets


def load_coco_json(ann_file: Path) -> dict[str, Any]:
    """Parse a COCO JSON file with user-facing errors for missing/bad files."""
    try:
        with open(ann_file, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise DataError(f"Annotation file {ann_file} does not exist.", fix="Check the dataset root or the *_ann_file path.") from None
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{ann_file}:{exc.lineno}: not valid JSON ({exc.msg}).",
            why="the file is truncated or not a COCO annotation file.",
            fix="Re-download or re-export the annotations.",
        ) from None
    if not isinstance(data, dict) or not all(k in data for k in ("images", "annotations", "categories")):
        raise DataError(
            f"{ann_file} is not a COCO annotation file.",
            why="it lacks one of the keys 'images', 'annotations', 'categories'.",
            fix="Point the layout at an instances_*.json or person_keypoints_*.json file.",
        )
    return data


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


def coco_categories(data: dict[str, Any], fields: tuple[str, ...], ann_file: Path) -> tuple[list[int], list[str], list[str] | None]:
    """Sorted category ids, names and (pose) keypoint names of a COCO file."""
    cats = data["categories"]
    if "keypoints" in fields:
        cats = [c for c in cats if c.get("keypoints")]
        if not cats:
            raise DataError(
                f"{ann_file} declares no category with 'keypoints'.",
                why="pose training needs keypoint names (COCO person_keypoints_*.json).",
                fix="Use the person_keypoints_{split}.json file for pose, or another task.",
            )
        kp_sets = {tuple(c["keypoints"]) for c in cats}
        if len(kp_sets) != 1:
            raise DataError(f"{ann_file}: categories declare different keypoint lists.", fix="Use one keypoint schema per dataset.")
    cats = sorted(cats, key=lambda c: int(c["id"]))
    ids = [int(c["id"]) for c in cats]
    if len(set(ids)) != len(ids):
        raise DataError(f"{ann_file}: duplicate category ids {ids}.", fix="Give every category a unique id.")
    names = [str(c.get("name", c["id"])) for c in cats]
    kp_names = list(cats[0]["keypoints"]) if "keypoints" in fields else None
    return ids, names, kp_names


def _bad(ann_file: Path, ann: dict[str, Any], what: str, fix: str) -> DataError:
    return DataError(f"{ann_file}: annotation id {ann.get('id')} (image {ann.get('image_id')}): {what}", fix=fix)


def read_coco(
    images_dir: Path,
    ann_file: Path,
    fields: tuple[str, ...],
    *,
    name: str = "",
    layout: str = "coco",
    check_files: bool = True,
) -> ImageSource:
    """Read a COCO JSON split.

    Args:
        images_dir: folder the ``file_name`` entries are relative to.
        ann_file: ``instances_*.json`` (det/seg/obb) or
            ``person_keypoints_*.json`` (pose).
        fields: the task's instance fields: ``polygons`` keeps segmentation
            rings, ``rboxes`` fits rotated boxes to them, ``keypoints`` reads
            keypoints (person_keypoints files).
        name: description for messages.
        layout: layout name recorded on the source.
        check_files: fail when an image listed in the JSON is missing.

    Returns:
        The split; images sorted by id, crowd excluded from targets.

    Raises:
        DataError: malformed JSON, unknown ids, NaN or negative sizes,
            missing images.
    """
    data = load_coco_json(ann_file)
    cat_ids, class_names, kp_names = coco_categories(data, fields, ann_file)
    label_of = {c: i for i, c in enumerate(cat_ids)}
    all_cat_ids = {int(c["id"]) for c in data["categories"]}
    k = len(kp_names) if kp_names is not None else None

    images = sorted(data["images"], key=lambda im: int(im["id"]))
    if not images:
        raise DataError(f"{ann_file} lists no images.", why="an empty split cannot be trained or evaluated.", fix="Check that the annotation file belongs to this dataset.")
    slot = {int(im["id"]): j for j, im in enumerate(images)}
    if len(slot) != len(images):
        raise DataError(f"{ann_file}: duplicate image ids.", fix="Give every image a unique id.")
    per_image: list[list[dict[str, Any]]] = [[] for _ in images]
    for ann in data["annotations"]:
        j = slot.get(int(ann.get("image_id", -1)))
        if j is None:
            raise _bad(ann_file, ann, "refers to an image id that is not in 'images'.", "Remove the annotation or add the image.")
        cid = int(ann.get("category_id", -1))
        if cid not in all_cat_ids:
            raise _bad(ann_file, ann, f"category_id {cid} is not declared in 'categories'.", "Declare the category or fix the id.")
        if cid not in label_of:  # pose file may hold non-keypoint categories
            continue
        per_image[j].append(ann)
    skeleton = keypoint_skeleton(data, cat_ids, k)
    del data

    meta = {} if k is None else {"num_keypoints": k, "flip_idx": keypoint_flip_idx(kp_names or []), "skeleton": skeleton}
    builder = SourceBuilder(fields, meta=meta)
    for j, im in enumerate(images):
        rel = str(im["file_name"])
        h, w = int(im.get("height", 0)), int(im.get("width", 0))
        if h <= 0 or w <= 0:
            raise DataError(f"{ann_file}: image id {im['id']} ({rel}) has no positive height/width.", fix="Add the image's true height and width to the JSON.")
        if check_files and not os.path.isfile(images_dir / rel):
            raise DataError(
                f"{ann_file}: image id {im['id']} refers to {images_dir / rel}, which does not exist.",
                why="annotations for a missing image cannot be trained on.",
                fix="Download the missing images or point the layout at the right folder.",
            )
        builder.add(rel, int(im["id"]), (h, w), _image_targets(per_image[j], fields, h, w, label_of, k, ann_file))
        per_image[j] = []  # free as we go
    return builder.build(
        root=images_dir,
        class_names=class_names,
        category_ids=cat_ids,
        ann_file=ann_file,
        name=name or str(ann_file),
        layout=layout,
    )


def _image_targets(
    anns: list[dict[str, Any]],
    fields: tuple[str, ...],
    h: int,
    w: int,
    label_of: dict[int, int],
    k: int | None,
    ann_file: Path,
) -> Targets:
    """Targets of one image from its annotations; crowd regions only when ``crowd`` is read (flagged, box only)."""
    boxes, labels, difficult, rings, owners, kps, crowd = [], [], [], [], [], [], []
    read_crowd = "crowd" in fields
    for ann in anns:
        is_crowd = bool(ann.get("iscrowd", 0))
        if is_crowd and not read_crowd:
            continue
        bbox = ann.get("bbox")
        if not isinstance(bbox, list | tuple) or len(bbox) != 4:
            raise _bad(ann_file, ann, f"bbox {bbox!r} is not [x, y, w, h].", "Write bbox as four numbers.")
        x, y, bw, bh = (float(v) for v in bbox)
        if not all(math.isfinite(v) for v in (x, y, bw, bh)):
            raise _bad(ann_file, ann, f"bbox {bbox} contains NaN or infinity.", "Fix or remove the annotation.")
        if bw < 0 or bh < 0:
            raise _bad(ann_file, ann, f"bbox {bbox} has a negative size.", "Fix or remove the annotation.")
        x1, y1 = min(max(x, 0.0), w), min(max(y, 0.0), h)
        x2, y2 = min(max(x + bw, 0.0), w), min(max(y + bh, 0.0), h)
        if x2 - x1 <= 0 or y2 - y1 <= 0:
            continue  # empty after clamping: nothing to learn from
        inst_rings: list[np.ndarray] = []
        if ("polygons" in fields or "rboxes" in fields) and not is_crowd:
            seg = ann.get("segmentation")
            if isinstance(seg, list):
                for ring in seg:
                    arr = np.asarray(ring, dtype=np.float64)
                    if arr.size >= 6 and arr.size % 2 == 0:
                        if not np.all(np.isfinite(arr)):
                            raise _bad(ann_file, ann, "segmentation contains NaN or infinity.", "Fix or remove the annotation.")
                        inst_rings.append(arr.reshape(-1, 2))
            elif isinstance(seg, dict):
                # Non-crowd RLE (mask exports): masks travel as rings only, so
                # trace its exact pixel outlines (holes filled, see rle_polygons).
                try:
                    inst_rings = rle_to_rings(seg, h, w)
                except ValueError as exc:
                    raise _bad(ann_file, ann, f"segmentation RLE is malformed ({exc}).",
                               "Write the RLE as {'size': [height, width], 'counts': ...} of this image.") from None
            if "polygons" in fields and not inst_rings:
                # Empty polygons or an empty RLE mask: no ring to train the mask on.
                continue
        n = len(boxes)
        for r in inst_rings:
            rings.append(r)
            owners.append(n)
        crowd.append(is_crowd)
        boxes.append((x1, y1, x2, y2))
        labels.append(label_of[int(ann["category_id"])])
        difficult.append(bool(ann.get("difficult", False)))
        if k is not None:
            kp = np.asarray(ann.get("keypoints") or [0.0] * (3 * k), dtype=np.float32)
            if kp.size != 3 * k:
                raise _bad(ann_file, ann, f"has {kp.size} keypoint numbers, expected {3 * k} (K={k} x 3).", "Write x, y, v for every keypoint.")
            kps.append(kp.reshape(k, 3))
    n = len(boxes)
    polys = Polygons.from_rings(rings, owners) if ("polygons" in fields or "rboxes" in fields) else None
    rboxes = None
    if "rboxes" in fields:
        rboxes = min_area_rboxes_of_polygons(polys, n) if polys is not None else np.zeros((n, 5), np.float32)
        # Annotations without a ring fall back to their axis-aligned box.
        no_ring = np.ones(n, bool)
        if polys is not None and polys.num_rings:
            no_ring[polys.ring_owner] = False
        if no_ring.any():
            b = np.asarray(boxes, np.float32).reshape(-1, 4)[no_ring]
            rboxes[no_ring] = canonicalize_rboxes(
                np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1], np.zeros(len(b))], 1)
            )
        polys = None
    kp_arr = vis = None
    if k is not None:
        kp3 = np.stack(kps).astype(np.float32) if kps else np.zeros((0, k, 3), np.float32)
        kp_arr, vis = kp3[..., :2].copy(), kp3[..., 2].copy()
    return Targets(
        boxes=np.asarray(boxes, np.float32).reshape(-1, 4),
        labels=np.asarray(labels, np.int64),
        difficult=np.asarray(difficult, bool),
        polygons=polys,
        rboxes=rboxes,
        keypoints=kp_arr,
        visibility=vis,
        crowd=np.asarray(crowd, bool) if read_crowd else None,
    )
