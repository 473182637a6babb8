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
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.data.source import ImageSource, SourceBuilder
from lucidyolo.errors import DataError
from lucidyolo.structures.fields import field_specs
from lucidyolo.structures.targets import Targets


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


def coco_categories(data: dict[str, Any], fields: tuple[str, ...], ann_file: Path) -> tuple[list[int], list[str], dict[str, Any]]:
    """Sorted category ids and names the task's fields can be read from, and the meta their rules find.

    A field with a ``categories`` rule narrows the categories (pose: those naming
    keypoints) and reads its meta from them (K, flip pairs, skeleton).
    """
    cats = list(data["categories"])
    meta: dict[str, Any] = {}
    for f in field_specs(fields):
        if f.coco is not None and f.coco.categories is not None:
            cats, found = f.coco.categories(cats, ann_file)
            meta.update(found)
    cats = sorted(cats, key=lambda c: int(c["id"]))
    ids = [int(c["id"]) for c in cats]
    if len(set(ids)) != len(ids):
        raise DataError(f"{ann_file}: duplicate category ids {ids}.", fix="Give every category a unique id.")
    names = [str(c.get("name", c["id"])) for c in cats]
    return ids, names, meta


class DroppedAnnotationsWarning(UserWarning):
    """Annotations of a COCO file that the task's field rule read nothing from (named, never silent)."""


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
        fields: the task's instance fields, each read by its COCO rule
            (``FieldSpec.coco``; the built-in ones: polygon rings, rotated
            boxes fitted to them, person_keypoints keypoints, crowd flags).
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
    cat_ids, class_names, meta = coco_categories(data, fields, ann_file)
    label_of = {c: i for i, c in enumerate(cat_ids)}
    all_cat_ids = {int(c["id"]) for c in data["categories"]}

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
    del data

    builder = SourceBuilder(fields, meta=meta)
    dropped: list[dict[str, Any]] = []  # annotations a field's rule read nothing from
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
        builder.add(rel, int(im["id"]), (h, w), _image_targets(per_image[j], fields, h, w, label_of, meta, ann_file, dropped))
        per_image[j] = []  # free as we go
    if dropped:
        first = dropped[0]
        warnings.warn(
            f"{ann_file}: {len(dropped)} annotation(s) left out: the task's field rule read nothing from them "
            f"(first: annotation id {first.get('id')}, image {first.get('image_id')}); they are not instances of "
            "this task (a polygon task's annotation without a ring)", DroppedAnnotationsWarning, stacklevel=2)
    return builder.build(
        root=images_dir,
        class_names=class_names,
        category_ids=cat_ids,
        ann_file=ann_file,
        name=name or str(ann_file),
        layout=layout,
    )


def _clamped_box(ann: dict[str, Any], h: int, w: int, ann_file: Path) -> tuple[float, float, float, float] | None:
    """The annotation's ``bbox`` as xyxy clamped to the image; ``None`` when nothing of it is left.

    Raises:
        DataError: a missing or malformed ``bbox``, NaN or a negative size.
    """
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
    return (x1, y1, x2, y2) if x2 - x1 > 0 and y2 - y1 > 0 else None


def _image_targets(
    anns: list[dict[str, Any]],
    fields: tuple[str, ...],
    h: int,
    w: int,
    label_of: dict[int, int],
    meta: dict[str, Any],
    ann_file: Path,
    dropped: list[dict[str, Any]],
) -> Targets:
    """Targets of one image from its annotations: the box, then each field's COCO rule.

    Crowd regions are kept (flagged, as ignore regions) only when a field of the
    task has an ignore-region attribute; otherwise they are not instances. A
    field rule may drop an annotation (a polygon task's annotation without a ring):
    it goes to ``dropped``, which the caller reports. When a field's rule says its
    instances have no box (``CocoRule.box`` False: points), ``bbox`` is neither
    needed nor read and each instance carries a zero box.
    """
    specs = field_specs(fields)
    ruled = [f for f in specs if f.coco is not None]
    read_crowd = any(a.ignore_region for f in specs for a in f.attrs)
    boxless = any(not f.coco.box for f in ruled)  # type: ignore[union-attr]
    boxes, labels, difficult = [], [], []
    values: list[list[Any]] = [[] for _ in ruled]
    for ann in anns:
        is_crowd = bool(ann.get("iscrowd", 0))
        if is_crowd and not read_crowd:
            continue
        box = (0.0, 0.0, 0.0, 0.0) if boxless else _clamped_box(ann, h, w, ann_file)
        if box is None:
            continue  # empty after clamping: nothing to learn from
        bad = lambda what, fix, ann=ann: _bad(ann_file, ann, what, fix)  # noqa: E731
        row = [f.coco.read(ann, (h, w), meta, is_crowd, bad) for f in ruled]  # type: ignore[union-attr]
        if any(v is None for v in row):
            dropped.append(ann)
            continue
        for out, v in zip(values, row, strict=True):
            out.append(v)
        boxes.append(box)
        labels.append(label_of[int(ann["category_id"])])
        difficult.append(bool(ann.get("difficult", False)))
    box_arr = np.asarray(boxes, np.float32).reshape(-1, 4)
    extra: dict[str, Any] = {}
    for f, vals in zip(ruled, values, strict=True):
        extra.update(f.coco.join(vals, box_arr, meta))  # type: ignore[union-attr]
    return Targets(boxes=box_arr, labels=np.asarray(labels, np.int64), difficult=np.asarray(difficult, bool), **extra)
