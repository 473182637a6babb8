"""DOTA tiler: window placement, the clipping rule (hand-computed U), determinism, read-back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lucidyolo.data.dota.clip import clip_objects, object_polygons
from lucidyolo.data.dota.tiler import tile_dota
from lucidyolo.data.dota.windows import tile_windows, window_starts
from lucidyolo.data.layouts import open_source
from lucidyolo.errors import DataError
from tests.task_fields import fields_of


def _square(x0, y0, x1, y1):
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def _diamond(cx, cy, r):
    return [[cx, cy - r], [cx + r, cy], [cx, cy + r], [cx - r, cy]]


def _clip(objs, window):
    corners = np.asarray(objs, np.float64).reshape(-1, 4, 2)
    polys, areas = object_polygons(corners)
    return clip_objects(corners, polys, areas, window)


# ----------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    ("length", "starts"),
    [
        (500, [0]),  # shorter than the patch: one window
        (1024, [0]),  # equal
        (1025, [0, 1]),  # one pixel longer: the second window is flush with the edge
        (1848, [0, 824]),  # exactly one stride longer: no duplicate flush window
        (2000, [0, 824, 976]),  # stride 824, last flush at 2000 - 1024
        (3000, [0, 824, 1648, 1976]),
    ],
)
def test_window_starts(length, starts):
    assert window_starts(length, 1024, 824) == starts


def test_windows_are_row_major_flush_and_keep_short_axes():
    wins = tile_windows(500, 2000, patch=1024, overlap=200)
    assert wins == [(0, 0, 500, 1024), (0, 824, 500, 1848), (0, 976, 500, 2000)]
    wins = tile_windows(1500, 1100, patch=1000, overlap=100)
    assert wins == [(0, 0, 1000, 1000), (500, 0, 1500, 1000), (0, 100, 1000, 1100), (500, 100, 1500, 1100)]
    assert all(x1 - x0 <= 1000 and y1 - y0 <= 1000 for x0, y0, x1, y1 in wins)


@pytest.mark.parametrize(("patch", "overlap"), [(1024, 1024), (512, 600), (512, -1), (0, 0)])
def test_overlap_not_below_patch_is_an_error(patch, overlap):
    with pytest.raises(DataError, match="--overlap|--patch"):
        tile_windows(2000, 2000, patch, overlap)


# ----------------------------------------------------------------------------- clipping rule


WINDOW = (0, 0, 200, 200)


def test_clipping_rule_against_hand_computed_areas():
    objs = [
        _square(20, 20, 80, 80),  # inside: U = 1
        _square(120, 20, 220, 120),  # 80 of 100 px inside: U = 0.8
        _square(130, 20, 230, 120),  # 70 inside: U = 0.7 exactly, kept as is
        _square(140, 20, 240, 120),  # 60 inside: U = 0.6
        _diamond(200, 100, 50),  # cut through its middle: U = 0.5
        _diamond(230, 100, 50),  # tip only: triangle 20 x 40 / 2 = 400 of 5000 -> U = 0.08
        _square(200, 20, 260, 80),  # touches the edge: U = 0
        _square(250, 250, 300, 300),  # outside
    ]
    c = _clip(objs, WINDOW)
    assert c.index.tolist() == [0, 1, 2, 3, 4, 5]
    assert np.allclose(c.u, [1.0, 0.8, 0.7, 0.6, 0.5, 0.08])
    assert c.cut.tolist() == [False, False, False, True, True, True]
    # U >= 0.7: the original corners, even where they pass the window edge
    for j in (0, 1, 2):
        assert np.array_equal(c.rings[j], np.asarray(objs[j], np.float64))
    # U < 0.7: re-fitted to the clipped piece, corners inside/at the window
    assert (c.rings[3:] >= 0).all() and (c.rings[3:] <= 200).all()
    from shapely import Polygon

    assert Polygon(c.rings[3]).area == pytest.approx(60 * 100)  # the clipped square itself
    assert sorted(map(tuple, c.rings[3].tolist())) == [(140, 20), (140, 120), (200, 20), (200, 120)]
    # The half diamond is a right triangle (area 2500); both its minimum rectangles have area 5000, and
    # clamping the one standing on the legs to the window brings it back to the triangle.
    assert 2500 - 1e-6 <= Polygon(c.rings[4]).area <= 5000 + 1e-6
    assert Polygon(c.rings[5]).area > 0


def test_window_offset_applies():
    c = _clip([_square(1000, 1000, 1100, 1100)], (1040, 900, 2064, 1924))  # 60 of 100 px inside
    assert c.cut.tolist() == [True] and np.isclose(c.u[0], 0.6)
    assert c.rings[0][:, 0].min() == 1040


def test_bow_tie_corner_order_is_read_as_its_quadrilateral():
    polys, areas = object_polygons(np.asarray([[[0, 0], [10, 10], [10, 0], [0, 10]]], np.float64))
    assert areas[0] == pytest.approx(100)


# ----------------------------------------------------------------------------- whole roots


def _scene(path: Path, w: int, h: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path)


def _label(path: Path, rows: list[str]) -> None:
    path.write_text("imagesource:GoogleEarth\ngsd:0.5\n" + "".join(r + "\n" for r in rows))


def _row(corners, cls="plane", diff=0):
    return " ".join(f"{v:g}" for v in np.asarray(corners).ravel()) + f" {cls} {diff}"


def make_root(base: Path, flat: bool = False) -> Path:
    """Three scenes: one cut by windows, one smaller than the patch, one without a label file."""
    root = base / "dota"
    sd = root if flat else root / "train"
    (sd / "images").mkdir(parents=True)
    (sd / "labelTxt").mkdir()
    _scene(sd / "images" / "A.png", 300, 200, 0)
    _label(
        sd / "labelTxt" / "A.txt",
        [
            _row(_square(10, 10, 50, 50)),  # only in window x0=0
            _row(_square(140, 20, 240, 120), "small-vehicle"),  # cut by the window x 0..160, fully in 140..300
            _row(_square(250, 150, 290, 190), "ship", 1),  # difficult in the label
            _row([[5, 5], [5, 5], [6, 6], [6, 6]]),  # zero area
        ],
    )
    _scene(sd / "images" / "B.png", 90, 120, 1)
    _label(sd / "labelTxt" / "B.txt", [_row(_square(0, 0, 40, 30), "storage-tank")])
    _scene(sd / "images" / "C.png", 100, 100, 2)  # no label file: background
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_tiles_and_json(tmp_path):
    root = make_root(tmp_path)
    s = tile_dota(root, tmp_path / "out", ["train"], patch=160, overlap=20).to_dict()
    # A: x starts 0, 140 (flush), y starts 0, 40 (flush) -> 4 tiles; B, C: one each
    assert (s["scenes"], s["tiles"], s["scenes_without_labels"], s["dropped_degenerate"]) == (3, 6, 1, 1)
    doc = json.loads((tmp_path / "out" / "annotations" / "instances_train.json").read_text())
    names = [im["file_name"] for im in doc["images"]]
    assert names == ["A__0_0.png", "A__140_0.png", "A__0_40.png", "A__140_40.png", "B__0_0.png", "C__0_0.png"]
    assert [im["id"] for im in doc["images"]] == [1, 2, 3, 4, 5, 6]
    assert [a["id"] for a in doc["annotations"]] == list(range(1, len(doc["annotations"]) + 1))
    assert doc["images"][4] == {"id": 5, "file_name": "B__0_0.png", "width": 90, "height": 120, "source_image": "B.png", "window": [0, 0, 90, 120]}
    assert Image.open(tmp_path / "out" / "train" / "B__0_0.png").size == (90, 120)  # not padded
    assert Image.open(tmp_path / "out" / "train" / "A__140_40.png").size == (160, 160)
    assert [c["id"] for c in doc["categories"]] == list(range(1, 16)) and doc["categories"][2]["name"] == "storage tank"
    by_image: dict[int, list] = {}
    for a in doc["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    # tile A__0_0 (x 0..160, y 0..160): the small plane whole; the vehicle 20 of 100 px in -> difficult, re-fitted
    t1 = by_image[1]
    assert [(a["category_id"], a["difficult"]) for a in t1] == [(1, 0), (11, 1)]
    assert t1[0]["segmentation"] == [[10.0, 10.0, 50.0, 10.0, 50.0, 50.0, 10.0, 50.0]]
    assert t1[0]["bbox"] == [10.0, 10.0, 40.0, 40.0] and t1[0]["area"] == 1600.0 and t1[0]["iscrowd"] == 0
    assert sorted(zip(t1[1]["segmentation"][0][::2], t1[1]["segmentation"][0][1::2], strict=True)) == [(140, 20), (140, 120), (160, 20), (160, 120)]
    # tile A__140_0: the vehicle whole, tile-local; the labelled-difficult ship stays difficult
    t2 = by_image[2]
    assert [(a["category_id"], a["difficult"]) for a in t2] == [(11, 0), (2, 1)]
    assert t2[0]["segmentation"] == [[0.0, 20.0, 100.0, 20.0, 100.0, 120.0, 0.0, 120.0]]
    assert by_image[5][0]["category_id"] == 3
    assert 6 not in by_image  # C: background tile kept
    assert s["empty_tiles"] == 1 and s["difficult_by_clipping"] == 3  # vehicle twice, plane once


def test_serial_and_two_workers_are_byte_identical(tmp_path):
    root = make_root(tmp_path)
    a = tile_dota(root, tmp_path / "serial", ["train"], patch=160, overlap=20, workers=0)
    b = tile_dota(root, tmp_path / "pool", ["train"], patch=160, overlap=20, workers=2)
    fa, fb = _files(tmp_path / "serial"), _files(tmp_path / "pool")
    assert list(fa) == list(fb) and len(fa) == a.total("tiles") + 1
    assert all(fa[k] == fb[k] for k in fa)
    assert a.total("objects") == b.total("objects")
    # jpg tiles are reproducible too
    c = tile_dota(root, tmp_path / "j1", ["train"], patch=160, overlap=20, suffix="jpg")
    tile_dota(root, tmp_path / "j2", ["train"], patch=160, overlap=20, suffix="jpg", workers=2)
    assert _files(tmp_path / "j1") == _files(tmp_path / "j2") and c.total("tiles") == a.total("tiles")


def test_output_reads_back_through_the_coco_reader(tmp_path):
    root = make_root(tmp_path)
    s = tile_dota(root, tmp_path / "out", ["train"], patch=160, overlap=20)
    src = open_source(tmp_path / "out", "train", fields_of("obb"))
    assert src.layout == "coco-split" and len(src) == 6
    assert src.num_instances == s.total("objects")
    diff = [src.targets(i).difficult.tolist() for i in range(len(src))]
    assert diff[0] == [False, True] and diff[1] == [False, True] and diff[5] == []
    t = src.targets(1)
    assert np.allclose(sorted(t.rboxes[0, 2:4]), [100, 100], atol=0.01)  # the vehicle's rotated box, whole


def test_drop_empty_tiles(tmp_path):
    root = make_root(tmp_path)
    s = tile_dota(root, tmp_path / "out", ["train"], patch=160, overlap=20, drop_empty_tiles=True).to_dict()
    assert s["empty_tiles"] == 0 and s["empty_tiles_dropped"] >= 1
    doc = json.loads((tmp_path / "out" / "annotations" / "instances_train.json").read_text())
    assert all(im["file_name"] != "C__0_0.png" for im in doc["images"])
    assert len(list((tmp_path / "out" / "train").iterdir())) == s["tiles"]


def test_flat_root_is_one_split_and_another_split_can_join(tmp_path):
    root = make_root(tmp_path / "a", flat=True)
    out = tmp_path / "out"
    tile_dota(root, out, ["train"], patch=160, overlap=20)
    with pytest.raises(DataError, match="flat DOTA folder"):
        tile_dota(root, out, ["train", "val"], patch=160, overlap=20)
    with pytest.raises(DataError, match="already exists"):
        tile_dota(root, out, ["train"], patch=160, overlap=20)
    tile_dota(root, out, ["val"], patch=160, overlap=20)
    assert sorted(p.name for p in out.iterdir()) == ["annotations", "train", "val"]
    assert open_source(out, "val", fields_of("obb")).num_instances == open_source(out, "train", fields_of("obb")).num_instances


def test_missing_split_and_orphan_label_are_named(tmp_path):
    root = make_root(tmp_path)
    with pytest.raises(DataError, match=r"val/images"):
        tile_dota(root, tmp_path / "out", ["train", "val"])
    (root / "train" / "labelTxt" / "Z.txt").write_text("")
    with pytest.raises(DataError, match=r"Z\.txt: label file has no image"):
        tile_dota(root, tmp_path / "out", ["train"])
    assert not (tmp_path / "out").exists()


def test_corrupt_scene_leaves_nothing_behind(tmp_path):
    root = make_root(tmp_path)
    (root / "train" / "images" / "B.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    out = tmp_path / "out"
    for workers in (0, 2):
        with pytest.raises(DataError, match=r"B\.png cannot be decoded") as exc:
            tile_dota(root, out, ["train"], patch=160, overlap=20, workers=workers)
        assert exc.value.fix  # the parts survive the worker process
        assert sorted(p.name for p in out.iterdir()) == []


def test_tiling_modules_import_without_torch():
    code = (
        "import sys\nimport lucidyolo.data.dota.tiler, lucidyolo.cli.tile, lucidyolo.cli.data\n"
        "print(','.join(m for m in sys.modules if m.split('.')[0] in ('torch', 'lightning', 'pytorch_lightning', 'torchvision')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr
