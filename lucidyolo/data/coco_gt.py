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
from lucidyolo.structures.geometry import polygon_areas


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

    cats: list[dict[str, Any]] = [{"id": cid, "name": n} for cid, n in zip(source.category_ids, source.class_names, strict=True)]
    k = source.meta().get("num_keypoints")
    if "keypoints" in source.fields and k:
        for c in cats:
            c["keypoints"] = [f"kp{i}" for i in range(k)]
            c["skeleton"] = []
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
        segs: list[list[list[float]]] | None = None
        if t.polygons is not None:
            ra = polygon_areas(t.polygons)
            area = np.zeros(n)
            np.add.at(area, t.polygons.ring_owner, ra)
            segs = [[] for _ in range(n)]
            for r in range(t.polygons.num_rings):
                segs[int(t.polygons.ring_owner[r])].append(t.polygons.ring(r).astype(np.float64).reshape(-1).tolist())
        if t.rboxes is not None:
            area = (t.rboxes[:, 2] * t.rboxes[:, 3]).astype(np.float64)
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
            if segs is not None:
                a["segmentation"] = segs[j]
            if t.rboxes is not None:
                a["rbox"] = t.rboxes[j].astype(np.float64).tolist()
            if t.keypoints is not None and t.visibility is not None:
                kp = np.concatenate([t.keypoints[j], t.visibility[j][:, None]], 1).astype(np.float64)
                a["keypoints"] = kp.reshape(-1).tolist()
                a["num_keypoints"] = int((t.visibility[j] > 0).sum())
            anns.append(a)
    return {"info": {"description": source.name}, "images": images, "annotations": anns, "categories": cats}
