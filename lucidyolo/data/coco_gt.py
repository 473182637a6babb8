"""A COCO-format ground-truth dict for any :class:`ImageSource`.

pycocotools needs a COCO ground truth. A split read from COCO JSON already has
one (``source.ann_file``): it is reused, so crowd and RLE annotations count
exactly as the official protocol counts them. YOLO, DOTA and synthetic roots
get one built from their targets (no crowd there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lucidyolo.data.source import ImageSource
from lucidyolo.structures.fields import field_specs


def build_coco_gt(source: ImageSource, use_ann_file: bool = True) -> dict[str, Any]:
    """COCO GT dict (``images``, ``annotations``, ``categories``) of a split.

    Args:
        source: the split.
        use_ann_file: reuse ``source.ann_file`` when the split came from COCO
            JSON (keeps crowd and RLE annotations); ``False`` always builds
            from the training targets.

    Returns:
        A dict accepted by ``pycocotools.coco.COCO`` (assign it to
        ``coco.dataset`` then call ``createIndex()``). Category ids are the
        dataset's own (``source.category_ids``). obb annotations carry an extra
        ``rbox`` ``[cx, cy, w, h, theta]``; every annotation carries
        ``difficult``.
    """
    if use_ann_file and source.ann_file is not None:
        from lucidyolo.data.coco import load_coco_json

        data = load_coco_json(source.ann_file)
        keep = set(source.category_ids)
        data["categories"] = [c for c in data["categories"] if int(c["id"]) in keep]
        data["annotations"] = [a for a in data["annotations"] if int(a["category_id"]) in keep]
        return data

    meta = source.meta()
    writers = [f.coco for f in field_specs(source.fields) if f.coco is not None]
    cats: list[dict[str, Any]] = [{"id": cid, "name": n} for cid, n in zip(source.category_ids, source.class_names, strict=True)]
    for c in cats:
        for rule in writers:
            if rule.write_category is not None:
                c.update(rule.write_category(meta))
    images: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    cat_of = np.asarray(source.category_ids, np.int64)
    for i in range(len(source)):
        h, w = source.image_hw(i)
        img_id = source.image_id(i)
        images.append({"id": img_id, "file_name": source.image_path(i).name, "height": h, "width": w})
        t = source.targets(i)
        n = len(t)
        if n == 0:
            continue
        xywh = np.concatenate([t.boxes[:, :2], t.boxes[:, 2:] - t.boxes[:, :2]], 1).astype(np.float64)
        area = xywh[:, 2] * xywh[:, 3]
        # each field's annotation keys (segmentation, rbox, keypoints; an area replacing the box's)
        extra = [rule.write(t.extra, n, meta) for rule in writers if rule.write is not None]
        for j in range(n):
            a: dict[str, Any] = {
                "id": len(anns) + 1,
                "image_id": img_id,
                "category_id": int(cat_of[t.labels[j]]),
                "bbox": xywh[j].tolist(),
                "area": float(area[j]),
                "iscrowd": 0,
                "difficult": int(t.difficult[j]),
            }
            for rows in extra:
                a.update(rows[j])
            anns.append(a)
    return {"info": {"description": source.name}, "images": images, "annotations": anns, "categories": cats}
