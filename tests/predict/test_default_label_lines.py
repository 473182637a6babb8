"""``--save-txt`` without a ``label_lines`` hook writes the field's own YOLO row, which its reader reads back."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

PLUGIN = Path(__file__).resolve().parents[1] / "point_plugin"


@pytest.fixture
def points_spec():
    sys.path.insert(0, str(PLUGIN))
    try:
        from lucid_points import SPEC

        yield SPEC
    finally:
        sys.path.remove(str(PLUGIN))


def test_a_point_task_without_the_hook_writes_its_fields_row_and_reads_it_back(points_spec, tmp_path):
    from lucidyolo.data.layouts import open_source
    from lucidyolo.engine.commands.predict import label_lines_of

    assert points_spec.label_lines is None
    write = label_lines_of(points_spec)
    rows = [{"point": [32.0, 16.0], "label": 1, "score": 0.9}, {"point": [96.0, 48.0], "label": 0, "score": 0.5}]
    lines = write(predictions=rows, image_hw=(64, 128), class_names=["a", "b"], meta={})
    # hand-derived: x / w and y / h of each point, then the confidence
    assert lines == ["1 0.250000 0.250000 0.9", "0 0.750000 0.750000 0.5"]
    # without the confidence column, the task's YOLO reader takes the file for training
    (tmp_path / "images" / "train").mkdir(parents=True)
    (tmp_path / "labels" / "train").mkdir(parents=True)
    from PIL import Image

    Image.new("RGB", (128, 64)).save(tmp_path / "images" / "train" / "a.jpg")
    (tmp_path / "labels" / "train" / "a.txt").write_text("".join(line.rsplit(" ", 1)[0] + "\n" for line in lines))
    (tmp_path / "data.yaml").write_text("path: .\ntrain: images/train\nval: images/train\nnames: [a, b]\n")
    t = open_source(tmp_path, "train", points_spec.fields).targets(0)
    assert np.allclose(t.point, [[32.0, 16.0], [96.0, 48.0]]) and t.labels.tolist() == [1, 0]


def test_predictions_without_the_fields_values_are_refused_naming_the_key(points_spec):
    from lucidyolo.engine.commands.predict import label_lines_of
    from lucidyolo.errors import NotAvailableError

    with pytest.raises(NotAvailableError, match="the predictions carry no 'point'"):
        label_lines_of(points_spec)(predictions=[{"box": [0, 0, 1, 1], "label": 0, "score": 1.0}],
                                    image_hw=(8, 8), meta={})


def test_a_box_task_without_the_hook_writes_the_detection_row():
    """The default equals the built-in detection hook's own lines."""
    import dataclasses

    from lucidyolo.engine.commands.predict import label_lines_of
    from lucidyolo.tasks.registry import get_task

    det = get_task("det")
    bare = dataclasses.replace(det, label_lines=None, fields=())
    rows = [{"box": [10.0, 20.0, 30.0, 60.0], "label": 2, "score": 0.75}]
    assert label_lines_of(bare)(predictions=rows, image_hw=(100, 200)) == ["2 0.100000 0.400000 0.100000 0.400000 0.75"]
    assert label_lines_of(bare)(predictions=rows, image_hw=(100, 200)) == det.label_lines(predictions=rows, image_hw=(100, 200))
