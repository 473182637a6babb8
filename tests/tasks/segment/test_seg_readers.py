"""Segmentation reading as the seg task reads (fields ``polygons`` + ``crowd``): real roots, a synthetic RLE file, the training batch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from pycocotools import mask as mask_utils

from lucidyolo.data.augment.pipeline import strengths_for_variant
from lucidyolo.data.datasets import TrainDataset
from lucidyolo.data.layouts import open_source
from lucidyolo.errors import DataError
from lucidyolo.structures.geometry import polygon_areas, polygons_to_masks
from lucidyolo.structures.packed import collate_packed, unpack
from tests.conftest import real_data_root

FIELDS = ("polygons", "crowd")
ROOT = real_data_root()


def split_stats(src) -> dict[str, int]:
    """Counts over a split, checking every image's instances against their rings on the way."""
    out = {"images": len(src), "instances": 0, "crowd": 0, "rings": 0, "points": 0}
    for i in range(len(src)):
        t = src.targets(i)
        t.validate()
        p = t.polygons
        crowd = t.crowd
        assert p is not None and crowd is not None
        rings_per = np.bincount(p.ring_owner, minlength=len(t))
        # Every instance owns a ring; crowd regions are boxes only (ignore regions).
        assert np.all(rings_per[~crowd] >= 1)
        assert np.all(rings_per[crowd] == 0)
        assert np.all(polygon_areas(p) > 0)
        if p.points.shape[0]:
            b = t.boxes[p.point_owner()]  # (P, 4) the owner's box of each point
            x, y = p.points[:, 0], p.points[:, 1]
            assert np.all((x >= b[:, 0] - 1) & (x <= b[:, 2] + 1) & (y >= b[:, 1] - 1) & (y <= b[:, 3] + 1))
        out["instances"] += int((~crowd).sum())
        out["crowd"] += int(crowd.sum())
        out["rings"] += p.num_rings
        out["points"] += int(p.points.shape[0])
    assert out["instances"] == src.num_instances  # crowd regions are not counted as instances
    return out


# ------------------------------------------------------------------- real data
@pytest.mark.realdata
@pytest.mark.skipif(ROOT is None, reason="real sample data (../shared/data or LUCID_REAL_DATA) is absent")
@pytest.mark.parametrize(
    ("split", "want"),
    [("train", {"images": 4, "instances": 13, "crowd": 0, "rings": 13}),
     ("val", {"images": 4, "instances": 17, "crowd": 0, "rings": 17})],
)
def test_coco8_seg_reads_one_ring_per_label_row(split, want):
    src = open_source(ROOT / "coco8-seg", split, FIELDS)
    got = split_stats(src)
    assert {k: got[k] for k in want} == want
    # YOLO seg rows are "class x1 y1 x2 y2 ...": one ring each, as many points as pairs.
    pairs = [(len(ln.split()) - 1) // 2 for p in (ROOT / "coco8-seg" / "labels" / split).glob("*.txt")
             for ln in p.read_text().splitlines() if ln.strip()]
    assert got["rings"] == len(pairs) and got["points"] == sum(pairs)


@pytest.mark.realdata
@pytest.mark.skipif(ROOT is None, reason="real sample data (../shared/data or LUCID_REAL_DATA) is absent")
def test_coco128_reads_polygons_and_crowd_regions():
    ann = json.loads((ROOT / "coco128_coco" / "annotations" / "instances_train2017.json").read_text())
    a = ann["annotations"]
    non_crowd = [x for x in a if not x["iscrowd"]]
    # Dataset fact: every non-crowd annotation is a polygon list, every crowd one an uncompressed RLE.
    assert all(isinstance(x["segmentation"], list) for x in non_crowd)
    assert all(isinstance(x["segmentation"], dict) and isinstance(x["segmentation"]["counts"], list)
               for x in a if x["iscrowd"])
    want_rings = sum(1 for x in non_crowd for r in x["segmentation"] if len(r) >= 6)
    got = split_stats(open_source(ROOT / "coco128_coco", "train", FIELDS))
    assert got == {"images": 128, "instances": 929, "crowd": 10, "rings": want_rings, "points": got["points"]}
    assert want_rings == 1048


# ------------------------------------------------------------ synthetic COCO
def _square_mask(h: int, w: int, y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
    m = np.zeros((h, w), np.uint8)
    m[y0:y1, x0:x1] = 1
    return m


def _write_coco(root: Path, anns: list[dict], h: int = 40, w: int = 60) -> Path:
    (root / "train2017").mkdir(parents=True)
    (root / "annotations").mkdir()
    Image.new("RGB", (w, h), (90, 120, 150)).save(root / "train2017" / "a.png")
    doc = {
        "images": [{"id": 7, "file_name": "a.png", "height": h, "width": w}],
        "categories": [{"id": 3, "name": "thing"}],
        "annotations": [{"id": k + 1, "image_id": 7, "category_id": 3, **x} for k, x in enumerate(anns)],
    }
    (root / "annotations" / "instances_train2017.json").write_text(json.dumps(doc))
    return root


def _rle(mask: np.ndarray, compressed: bool) -> dict:
    if compressed:  # as a JSON file holds it: counts a str
        r = mask_utils.encode(np.asfortranarray(mask))
        return {"size": [int(v) for v in r["size"]], "counts": r["counts"].decode("ascii")}
    flat = mask.ravel(order="F").astype(np.int8)
    runs = np.diff(np.r_[0, np.flatnonzero(np.diff(flat)) + 1, flat.size]).tolist()
    return {"size": list(mask.shape), "counts": [0, *runs] if flat[0] else runs}


@pytest.mark.parametrize("compressed", [True, False], ids=["compressed", "uncompressed"])
def test_non_crowd_rle_is_read_as_rings_beside_polygons_and_crowd(tmp_path, compressed):
    h, w = 40, 60
    obj = _square_mask(h, w, 5, 15, 10, 30)  # rows 5..14, cols 10..29
    obj[8:11, 15:20] = 0  # a hole: read as filled
    crowd = _square_mask(h, w, 20, 35, 35, 55)
    root = _write_coco(tmp_path / "d", [
        {"iscrowd": 0, "bbox": [10, 5, 20, 10], "area": float(obj.sum()), "segmentation": _rle(obj, compressed)},
        {"iscrowd": 0, "bbox": [2, 20, 20, 15], "area": 150.0, "segmentation": [[2, 20, 22, 20, 12, 35]]},
        {"iscrowd": 1, "bbox": [35, 20, 20, 15], "area": 300.0, "segmentation": _rle(crowd, False)},
    ], h, w)
    src = open_source(root, "train", FIELDS)
    assert src.num_instances == 2 and len(src.targets(0)) == 3
    t = src.targets(0)
    assert t.crowd.tolist() == [False, False, True]
    rings = [t.polygons.rings_of(i) for i in range(3)]
    assert [len(r) for r in rings] == [1, 1, 0]
    assert {tuple(p) for p in rings[0][0].tolist()} == {(10.0, 5.0), (30.0, 5.0), (30.0, 15.0), (10.0, 15.0)}
    np.testing.assert_allclose(rings[1][0], [[2, 20], [22, 20], [12, 35]])
    np.testing.assert_allclose(t.boxes[2], [35, 20, 55, 35])
    masks = polygons_to_masks(t.polygons, 3, h, w)
    assert np.array_equal(masks[0], _square_mask(h, w, 5, 15, 10, 30)) and masks[2].sum() == 0
    # Without "crowd" the crowd region is not read at all, as before.
    assert len(open_source(root, "train", ("polygons",)).targets(0)) == 2


def test_empty_rle_is_skipped_and_a_bad_one_is_refused(tmp_path):
    h, w = 40, 60
    empty = np.zeros((h, w), np.uint8)
    root = _write_coco(tmp_path / "e", [
        {"iscrowd": 0, "bbox": [1, 1, 5, 5], "area": 0.0, "segmentation": _rle(empty, True)},
        {"iscrowd": 0, "bbox": [2, 2, 4, 4], "area": 16.0, "segmentation": [[2, 2, 6, 2, 6, 6, 2, 6]]},
    ], h, w)
    assert len(open_source(root, "train", FIELDS).targets(0)) == 1
    assert len(open_source(root, "train", ("crowd",)).targets(0)) == 2  # detection keeps the box
    bad = _write_coco(tmp_path / "f", [
        {"iscrowd": 0, "bbox": [1, 1, 5, 5], "area": 25.0, "segmentation": {"size": [w, h], "counts": "PZ2"}},
    ], h, w)
    with pytest.raises(DataError, match="RLE"):
        open_source(bad, "train", FIELDS)


# ------------------------------------------------------------ training batch
def _training_batch(size: int = 320, n: int = 16):
    src = open_source(ROOT / "coco8-seg", "train", FIELDS)
    st = strengths_for_variant("n", mosaic=1.0, copy_paste=1.0, flip_lr=0.5)
    ds = TrainDataset(src, size, "n", seed=0, strengths=st)
    samples = [ds[(0, p, p % len(src))] for p in range(n)]
    return samples, unpack(collate_packed(samples, FIELDS))


@pytest.mark.realdata
@pytest.mark.skipif(ROOT is None, reason="real sample data (../shared/data or LUCID_REAL_DATA) is absent")
def test_seg_training_batch_keeps_a_ring_and_mask_pixels_for_every_instance():
    """coco8-seg through mosaic + affine + copy-paste + flip and the packed collate."""
    size = 320
    samples, (images, gt, _) = _training_batch(size)
    kept = gt["mask"]
    assert images.shape == (16, 3, size, size) and int(kept.sum()) > 0
    lengths, img_of, slot = gt["poly_ring_lengths"], gt["poly_ring_image"], gt["poly_ring_slot"]
    assert int(lengths.sum()) == gt["poly_points"].shape[0] and bool((lengths >= 3).all())
    owned = torch.zeros_like(kept)
    owned[img_of, slot] = True
    assert bool(kept[img_of, slot].all())  # no ring points at a padding slot
    assert bool((owned == kept).all())  # each kept instance still owns a ring
    # And its rasterised mask still covers pixels of the image (rings may run past it: the
    # rasterisers sample only inside the image or the GT box, so nothing clips them).
    for s in samples:
        masks = polygons_to_masks(s.targets.polygons, len(s.targets), size, size)
        assert np.all(masks.reshape(len(masks), -1).sum(1) > 0)
