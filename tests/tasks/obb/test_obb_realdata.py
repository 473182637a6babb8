"""Oriented boxes on real DOTA files: one epoch on dota8 (YOLO-OBB tiles); dota_v1_examples scenes tiled,
trained on for one epoch and evaluated per tile, per whole scene and with DOTA's VOC mAP50."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import real_data_root

ROOT = real_data_root()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.realdata,
    pytest.mark.skipif(ROOT is None, reason="real sample data (../shared/data or LUCID_REAL_DATA) is absent"),
]

ONE_EPOCH = ("--trainer.max_epochs", "1", "--data.batch_size", "4", "--data.num_workers", "0")


def test_one_epoch_on_dota8(tmp_path, lucid):
    root = ROOT / "dota8"
    if not root.is_dir():
        pytest.skip(f"{root} is absent")
    r = lucid("fit", "obb", "--data-root", str(root), *ONE_EPOCH, "--data.img_size", "320",
              "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_untiled_scenes_are_refused_with_the_tiling_command(tmp_path, lucid):
    r = lucid("fit", "obb", "--data-root", str(ROOT / "dota_v1_examples"), *ONE_EPOCH, "--data.img_size", "1024",
              "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    text = " ".join(r.stderr.split())
    assert "lucid data tile dota" in text and "P0168" in text or "larger than the training size" in text


def test_tile_fit_eval_on_dota_v1_examples(tmp_path, lucid):
    tiles = tmp_path / "tiles"
    for split in ("train", "val"):  # the examples are one flat set of scenes: tiled once per split name
        r = lucid("data", "tile", "dota", "--data-root", str(ROOT / "dota_v1_examples"), "--out", str(tiles),
                  "--splits", split, "--patch", "1024", "--overlap", "200", "--workers", "2", "--json")
        assert r.returncode == 0, r.stderr[-3000:]
    r = lucid("fit", "obb", "--data-root", str(tiles), *ONE_EPOCH, "--data.img_size", "512",
              "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    ckpt = tmp_path / "runs" / "version_0" / "checkpoints" / "last.ckpt"
    out = tmp_path / "eval"
    r = lucid("eval", "--checkpoint", str(ckpt), "--data-root", str(tiles), "--img-size", "512",
              "--output", str(out / "report.json"), cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["num_scenes"] == 6
    for path in ("e2e", "nms"):
        got = report["paths"][path]
        assert set(got) == {"rotated (per tile)", "rotated (whole scene)", "DOTA VOC07 (whole scene)"}
        for stats in (got["rotated (per tile)"]["stats"], got["rotated (whole scene)"]["stats"]):
            assert 0.0 <= stats["mAP50-95"] <= stats["mAP50"] <= 1.0
        assert math.isfinite(got["DOTA VOC07 (whole scene)"]["stats"]["mAP50"])


def test_whole_scenes_rebuilt_from_tiles_hold_every_labelled_object_once(tmp_path, lucid):
    """Tile, then rebuild each scene's ground truth by core ownership: one copy of every labelTxt object."""
    import numpy as np

    from lucidyolo.data.dota.reader import parse_dota_label_file
    from lucidyolo.data.layouts import open_source
    from lucidyolo.structures.geometry import corners_to_rbox
    from lucidyolo.tasks.obb.hooks import tile_windows
    from lucidyolo.tasks.obb.rotated_map import rotated_iou
    from lucidyolo.tasks.obb.scene_merge import scene_ground_truth

    scenes = ROOT / "dota_v1_examples"
    r = lucid("data", "tile", "dota", "--data-root", str(scenes), "--out", str(tmp_path), "--splits", "val")
    assert r.returncode == 0, r.stderr[-3000:]
    src = open_source(tmp_path, "val", ("rboxes",))
    gts = [(t.rboxes.astype(np.float64), t.labels, t.difficult) for t in map(src.targets, range(len(src)))]
    names, rebuilt = scene_ground_truth(gts, tile_windows(src, len(src)))
    assert len(names) == 6
    for name, (rb, _, difficult) in zip(names, rebuilt, strict=True):
        corners, _, diff = parse_dota_label_file(scenes / "labelTxt" / f"{name.rsplit('.', 1)[0]}.txt")
        assert len(rb) == len(corners), name
        assert int(difficult.sum()) == int(diff.sum()), name
        best = rotated_iou(corners_to_rbox(corners).astype(np.float64), rb).max(1)
        assert (best > 0.8).all(), (name, np.sort(best)[:5])
