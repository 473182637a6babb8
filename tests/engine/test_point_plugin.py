"""A task whose instances are points without boxes trains through ``lucid fit`` with no engine edit.

The plugin (``tests/point_plugin/lucid_points``) is installed the way a user
installs one (an entry point on ``PYTHONPATH``), reads the standard YOLO folder
layout with its own row rule ``c x y``, carries no boxes, and keeps or drops a
point after a crop by its own survival rule.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

import numpy as np
import pytest

PLUGIN = Path(__file__).resolve().parents[1] / "point_plugin"


@pytest.fixture(autouse=True)
def _plugin_importable():
    """The plugin package importable in this process (the CLI tests install it through an entry point)."""
    sys.path.insert(0, str(PLUGIN))
    yield
    sys.path.remove(str(PLUGIN))


def _install(tmp: Path) -> dict[str, str]:
    info = tmp / "lucid_points-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lucid-points\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[lucidyolo.tasks]\npoints = lucid_points:TASK\n")
    return {"PYTHONPATH": os.pathsep.join([str(PLUGIN), str(tmp), os.environ.get("PYTHONPATH", "")]),
            "PYTHONDONTWRITEBYTECODE": "1"}


def _write_points_root(root: Path, n_train: int = 24, n_val: int = 8, size: int = 128) -> None:
    from lucid_points.synthetic import make_synthetic

    make_synthetic(root, n_train + n_val, size, seed=0)


def test_the_points_field_reads_its_own_rows_and_survives_by_its_own_rule(tmp_path):
    import lucid_points  # noqa: F401  (registers the field)

    from lucidyolo.data.augment.affine import IsoAffine, clip_and_filter, transform_targets
    from lucidyolo.data.layouts import open_source

    _write_points_root(tmp_path, n_train=2, n_val=1, size=128)
    src = open_source(tmp_path, "train", ("points",))
    t = src.targets(0)
    row = (tmp_path / "labels" / "train" / "000.txt").read_text().split("\n")[0].split()
    assert np.allclose(t.point[0], [float(row[1]) * 128, float(row[2]) * 128], atol=1e-4)
    assert not t.boxes.any()  # no carrier boxes: the row holds none and nothing invents them
    # a point inside the visible region survives although its (zero) box would fail the box rule;
    # one pushed outside is dropped
    moved = transform_targets(t, IsoAffine(1.0, 0.0, 0.0))
    kept = clip_and_filter(moved, (0.0, 0.0, 128.0, 128.0))
    assert len(kept) == len(t)
    inside = int(((t.point[:, 0] >= 0) & (t.point[:, 0] < 64)).sum())
    assert len(clip_and_filter(transform_targets(t, IsoAffine(1.0, 0.0, 0.0)), (0.0, 0.0, 64.0, 128.0))) == inside


def test_the_point_plugin_passes_the_contract_check():
    """Every hook it provides, on its own synthetic set read through the YOLO reader; the field through
    mosaic, affine and a mirrored run."""
    from lucid_points import SPEC

    from lucidyolo.testing import check_task_spec

    done = check_task_spec(SPEC)
    assert {"make_synthetic", "augment", "build_model", "build_criterion", "decode", "build_metric"} <= set(done), done


def test_a_plugin_sets_its_own_data_and_trainer_defaults():
    from lucid_points import SPEC

    cfg = SPEC.run_config.model_validate({"model": {"task": "points"}})
    assert (cfg.data.img_size, cfg.data.batch_size, cfg.trainer.max_epochs) == (128, 8, 24)
    assert cfg.augment.mosaic is None and cfg.trainer.devices == "auto"  # the rest are the shared defaults
    mine = SPEC.run_config.model_validate({"model": {"task": "points"}, "data": {"img_size": 64}})
    assert mine.data.img_size == 64 and mine.data.batch_size == 8  # a user's value wins over the plugin's default


@pytest.mark.slow
def test_points_without_boxes_train_through_lucid_fit(lucid, tmp_path):
    env = _install(tmp_path / "site")
    root = tmp_path / "dots"
    _write_points_root(root)
    # 24 epochs, 128 px, batch 8: the plugin's own `data` / `trainer` defaults (config_data, config_trainer)
    r = lucid("fit", "points", "--data-root", str(root), "--data.num_workers", "0", "--optim.lr", "0.01",
              "--optim.warmup_epochs", "1",
              "--trainer.default_root_dir", str(tmp_path / "runs"), env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = next((tmp_path / "runs").rglob("results.csv")).parent
    with open(run / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24
    loss = [float(x["train/heat_loss"]) for x in rows]
    assert loss[-1] < 0.5 * loss[0], loss  # it learns the dots
    assert float(rows[-1]["val/f1"]) > 0.5, rows[-1]  # measured 0.94 after 30 epochs
    assert (run / "labels.json").is_file()
    assert '"box_centre"' not in (run / "labels.json").read_text()  # no box panels for a task without boxes


def test_a_coco_file_of_points_needs_no_bbox_and_names_what_it_leaves_out(tmp_path):
    """The field's COCO rule says its instances have no box: annotations without ``bbox`` are read, and one
    the rule reads nothing from is left out with a warning naming it, never silently."""
    import json

    import lucid_points  # noqa: F401  (registers the field)
    from PIL import Image

    from lucidyolo.data.coco import DroppedAnnotationsWarning, read_coco

    Image.new("RGB", (64, 48)).save(tmp_path / "a.jpg")
    ann = {
        "images": [{"id": 1, "file_name": "a.jpg", "height": 48, "width": 64}],
        "categories": [{"id": 3, "name": "dot"}],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 3, "point": [5.0, 7.0]},
            {"id": 11, "image_id": 1, "category_id": 3, "point": [60.0, 40.0]},
            {"id": 12, "image_id": 1, "category_id": 3, "bbox": [1, 1, 5, 5]},  # no point: not an instance
        ],
    }
    (tmp_path / "points.json").write_text(json.dumps(ann))
    with pytest.warns(DroppedAnnotationsWarning, match="1 annotation\\(s\\) left out.*annotation id 12"):
        source = read_coco(tmp_path, tmp_path / "points.json", ("points",))
    t = source.targets(0)
    assert np.allclose(t.point, [[5.0, 7.0], [60.0, 40.0]]) and t.labels.tolist() == [0, 0]
    assert not t.boxes.any()


def test_the_contract_check_refuses_a_task_without_boxes_whose_field_does_not_decide_survival(tmp_path, monkeypatch):
    """Without survive_alone the engine's box rule drops every zero box: the spec check says so, and the
    augmentation check finds 0 of N instances kept."""
    import dataclasses

    import lucid_points  # noqa: F401  (registers the field)
    from lucid_points import SPEC

    from lucidyolo.structures import fields
    from lucidyolo.testing import exercise_hooks, task_spec_problems

    broken = dataclasses.replace(fields.get_field("points"), survive_alone=False)
    monkeypatch.setitem(fields._FIELDS, "points", broken)
    monkeypatch.setitem(fields._ATTRS, "point", (broken, broken.attrs[0]))
    assert any("boxes=False, but no field of the task decides survival" in p for p in task_spec_problems(SPEC))
    with pytest.raises(AssertionError, match="augment: 4 training samples drawn from \\d+ instances kept 0 of them"):
        exercise_hooks(SPEC, workdir=tmp_path)
