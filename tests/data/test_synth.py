"""The synthetic shapes set: reproducible bytes, learnable geometry."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from lucidyolo.data.layouts import open_source
from lucidyolo.data.synth import write_synthetic
from lucidyolo.errors import DataError
from tests.task_fields import fields_of

from .conftest import run_data_cli


def _digest(root) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", ["coco", "yolo"])
def test_same_seed_gives_byte_identical_files(tmp_path, fmt):
    a = write_synthetic(tmp_path / "a", fields_of("seg"), 6, 96, seed=3, fmt=fmt)
    b = write_synthetic(tmp_path / "b", fields_of("seg"), 6, 96, seed=3, fmt=fmt)
    c = write_synthetic(tmp_path / "c", fields_of("seg"), 6, 96, seed=4, fmt=fmt)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_objects_are_sized_and_mostly_apart(synth):
    src = open_source(synth("det", "coco", n=30, size=200), "train", fields_of("det"))
    sides, overlaps = [], []
    for i in range(len(src)):
        b = src.targets(i).boxes
        sides.extend(np.maximum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]) / 200)
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        for j in range(len(b)):
            for k in range(j + 1, len(b)):
                iw = max(0, min(b[j, 2], b[k, 2]) - max(b[j, 0], b[k, 0]))
                ih = max(0, min(b[j, 3], b[k, 3]) - max(b[j, 1], b[k, 1]))
                overlaps.append(iw * ih / min(area[j], area[k]))
    sides = np.asarray(sides)
    assert sides.min() >= 0.05 and sides.max() <= 0.41
    assert np.mean(np.asarray(overlaps) > 0.3) < 0.1
    counts = src.instance_counts()
    assert np.all(counts > 0)  # every class appears


def test_class_colours_are_distinct(synth):
    src = open_source(synth("det", "coco", n=20, size=160), "train", fields_of("det"))
    means = [[] for _ in range(4)]
    for i in range(len(src)):
        img, t = src.load_image(i), src.targets(i)
        for b, lab in zip(t.boxes.astype(int), t.labels, strict=True):
            cx, cy = (b[0] + b[2]) // 2, (b[1] + b[3]) // 2
            means[lab].append(img[cy, cx].astype(float))
    centres = np.array([np.mean(m, 0) for m in means])
    d = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    assert d[~np.eye(4, dtype=bool)].min() > 60


def test_a_writer_that_loses_the_race_keeps_the_winners_set(tmp_path, monkeypatch):
    # two runs started together on the default set: both write, one renames into place first;
    # the other must return the finished set instead of failing on the non-empty folder
    import lucidyolo.data.synth as synth

    out = tmp_path / "set"
    real = synth._write_split
    raced = []

    def write_and_race(*args, **kwargs):
        if not raced:
            raced.append(True)
            write_synthetic(out, fields_of("det"), 4, 64, seed=2)  # the other process, finishing first
        real(*args, **kwargs)

    monkeypatch.setattr(synth, "_write_split", write_and_race)
    assert write_synthetic(out, fields_of("det"), 4, 64, seed=2) == out
    monkeypatch.setattr(synth, "_write_split", real)
    assert _digest(out) == _digest(write_synthetic(tmp_path / "alone", fields_of("det"), 4, 64, seed=2))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".synth-")] == []  # the loser's temp folder is gone


def test_reusing_a_folder_with_other_parameters_is_refused(tmp_path):
    write_synthetic(tmp_path / "s", fields_of("det"), 4, 64, seed=0)
    assert write_synthetic(tmp_path / "s", fields_of("det"), 4, 64, seed=0) == tmp_path / "s"
    with pytest.raises(DataError, match="not empty"):
        write_synthetic(tmp_path / "s", fields_of("det"), 4, 64, seed=1)


def test_synth_command_writes_a_root_that_checks_ok(tmp_path):
    out = tmp_path / "cli"
    r = run_data_cli("synth", "--out", str(out), "--task", "obb", "--images", "5", "--img-size", "96", "--format", "yolo")
    assert r.returncode == 0, r.stderr
    src = open_source(out, "val", fields_of("obb"))
    assert len(src) == 1 and src.targets(0).rboxes.shape[1] == 5
    r = run_data_cli("check", "--data-root", str(out), "--json")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_first_field_with_a_synth_rule_picks_the_scene():
    from dataclasses import replace

    from lucidyolo.data.synth import SHAPES
    from lucidyolo.data.synth_scene import scene_of
    from lucidyolo.structures.fields import field_specs, get_field
    from lucidyolo.tasks.keypoints.synthetic import SCENE as SYMBOLS
    from lucidyolo.tasks.obb.synthetic import SCENE as BARS

    assert scene_of(field_specs(fields_of("det")), SHAPES) is SHAPES
    assert scene_of(field_specs(fields_of("pose")), SHAPES) is SYMBOLS
    plugin = replace(get_field("crowd"), name="bars", synth="lucidyolo.tasks.obb.synthetic:SCENE")
    assert scene_of((get_field("crowd"), plugin, get_field("keypoints")), SHAPES) is BARS
    with pytest.raises(TypeError, match="not a SyntheticScene"):
        scene_of((replace(plugin, synth="lucidyolo.data.synth:SHAPE_CLASSES"),), SHAPES)
