"""`lucid data tile dota` through the real console script."""

from __future__ import annotations

import json

import pytest

from lucidyolo.data.layouts import open_source
from tests.conftest import real_data_root
from tests.data.test_tiling import make_root
from tests.task_fields import fields_of


def _tile(lucid, root, out, *extra):
    return lucid("data", "tile", "dota", "--data-root", str(root), "--out", str(out), *extra, timeout=300)


def test_tiles_a_root_and_prints_the_summary(lucid, tmp_path):
    root = make_root(tmp_path)
    r = _tile(lucid, root, tmp_path / "out", "--splits", "train", "--patch", "160", "--overlap", "20")
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("Tiled 3 scenes (1 without a label file: no objects) (train) into 6 tiles (1 empty)")
    assert "flagged difficult by clipping" in line and f"--data-root {tmp_path / 'out'}" in line
    # the old spelling --root still works for one release: one warning line on stderr naming --data-root
    j = lucid("data", "tile", "dota", "--root", str(root), "--out", str(tmp_path / "out2"), "--splits", "train",
              "--patch", "160", "--overlap", "20", "--json", "--workers", "2", timeout=300)
    assert j.returncode == 0, j.stderr
    warned = [ln for ln in j.stderr.splitlines() if "deprecated" in ln]
    assert len(warned) == 1 and "--root" in warned[0] and "use --data-root" in warned[0], j.stderr
    assert "deprecated" not in r.stderr
    s = json.loads(j.stdout)
    assert (s["scenes"], s["tiles"], s["empty_tiles"], s["workers"]) == (3, 6, 1, 2)
    assert s["splits"][0]["ann_file"].endswith("instances_train.json")
    assert (tmp_path / "out" / "annotations" / "instances_train.json").read_bytes() == (
        tmp_path / "out2" / "annotations" / "instances_train.json"
    ).read_bytes()


def test_malformed_label_line_exits_2_and_leaves_no_split(lucid, tmp_path):
    root = make_root(tmp_path)
    lab = root / "train" / "labelTxt" / "B.txt"
    lab.write_text(lab.read_text() + "1 2 3 plane\n")  # line 4
    out = tmp_path / "out"
    r = _tile(lucid, root, out, "--splits", "train")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{lab}:4" in r.stderr.replace("\n", "")
    assert not (out / "train").exists() and not (out / "annotations" / "instances_train.json").exists()
    assert not list(out.glob(".*.partial*"))  # staging folders are per run: .{split}.partial-{host}-{pid}-{random}


def test_flat_root_with_two_splits_exits_2(lucid, tmp_path):
    root = make_root(tmp_path, flat=True)
    r = _tile(lucid, root, tmp_path / "out")  # default --splits train,val
    assert r.returncode == 2 and "flat DOTA folder" in r.stderr and "--splits train" in r.stderr
    assert not (tmp_path / "out").exists()


def test_existing_split_exits_2_and_is_not_touched(lucid, tmp_path):
    root = make_root(tmp_path)
    out = tmp_path / "out"
    assert _tile(lucid, root, out, "--splits", "train", "--patch", "160", "--overlap", "20").returncode == 0
    before = (out / "annotations" / "instances_train.json").read_bytes()
    r = _tile(lucid, root, out, "--splits", "train")
    assert r.returncode == 2 and "already exists" in r.stderr
    assert (out / "annotations" / "instances_train.json").read_bytes() == before


def test_overlap_not_below_patch_exits_2(lucid, tmp_path):
    r = _tile(lucid, make_root(tmp_path), tmp_path / "out", "--splits", "train", "--patch", "512", "--overlap", "512")
    assert r.returncode == 2 and "--overlap 512" in r.stderr


@pytest.mark.realdata
def test_tiles_the_dota_examples(lucid, tmp_path):
    root = real_data_root() / "dota_v1_examples"
    out = tmp_path / "out"
    r = _tile(lucid, root, out, "--splits", "train", "--patch", "1024", "--overlap", "200", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    scenes = sorted(p.name for p in (root / "images").iterdir())
    assert s["scenes"] == len(scenes) == 6 and s["objects"] > 0 and s["scenes_without_labels"] == 0
    doc = json.loads((out / "annotations" / "instances_train.json").read_text())
    assert len(doc["images"]) == s["tiles"] == len(list((out / "train").iterdir()))
    assert sorted({im["source_image"] for im in doc["images"]}) == scenes  # every scene gave >= 1 tile
    assert len(doc["annotations"]) == s["objects"]
    ships = [a for a in doc["annotations"] if a["category_id"] == 2 and doc["images"][a["image_id"] - 1]["source_image"] == "P0706.png"]
    assert len(ships) > 400  # P0706 is a harbour of ~500 ships, most seen by several overlapping tiles
    src = open_source(out, "train", fields_of("obb"))
    assert src.num_instances == s["objects"] and len(src) == s["tiles"]
