"""`lucid data check` without a task guesses a root's fields from the registered fields' rules."""

from __future__ import annotations

import pytest

from lucidyolo.data.check import infer_fields
from lucidyolo.data.synth import write_synthetic
from tests.task_fields import fields_of

CASES = [  # (task whose synthetic set is written, format, the attributes the guess must name)
    ("det", "coco", ()),
    ("det", "yolo", ()),
    ("seg", "yolo", ("polygons",)),
    ("obb", "yolo", ("rboxes",)),
    ("keypoints", "yolo", ("keypoints", "visibility")),  # the yaml's kpt_shape
    ("keypoints", "coco", ("keypoints", "visibility")),  # only person_keypoints_*.json: the field's own prefix
]


@pytest.mark.parametrize(("task", "fmt", "expected"), CASES, ids=[f"{t}-{f}" for t, f, _ in CASES])
def test_the_guess_names_the_field_the_files_carry(task, fmt, expected, tmp_path):
    root = write_synthetic(tmp_path / "root", fields_of(task), 4, img_size=64, seed=0, fmt=fmt)
    assert infer_fields(root) == expected
