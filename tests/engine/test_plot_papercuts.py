"""The pictures' papercuts (issue 44 item 6): confusion-matrix labels and cells, the ``labels.png`` title,
one set of curve file names for the run folder and ``lucid eval --plots``."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.engine.run.curve_plots import (
    BACKGROUND_COLUMN,
    BACKGROUND_ROW,
    PREDICTED_AXIS,
    TRUE_AXIS,
    confusion_cells,
    confusion_figure,
    plot_prefix,
)
from lucidyolo.engine.run.label_plots import dataset_name, draw_label_stats, label_title

CM = np.array([[50, 1, 0], [0, 3, 2], [4, 0, 0]])  # rows true (cat, dog, background), columns predicted


def test_confusion_cells_are_counts_with_contrast_aware_colours():
    cells = {(i, j): (text, colour) for i, j, text, colour in confusion_cells(CM, normalise=False)}
    assert set(cells) == {(0, 0), (0, 1), (1, 1), (1, 2), (2, 0)}  # zero cells stay blank
    assert cells[(0, 0)] == ("50", "white")  # the darkest cell
    assert cells[(0, 1)] == ("1", "black")  # a pale one
    assert cells[(1, 1)][0] == "3" and cells[(2, 0)][0] == "4"


def test_normalised_cells_keep_two_decimals_per_true_row():
    cells = {(i, j): (text, colour) for i, j, text, colour in confusion_cells(CM, normalise=True)}
    assert cells[(0, 0)] == ("0.98", "white") and cells[(0, 1)] == ("0.02", "black")
    assert cells[(1, 1)][0] == "0.60" and cells[(1, 2)] == ("0.40", "black")
    assert cells[(2, 0)] == ("1.00", "white")
    assert confusion_cells(np.zeros((2, 2), np.int64), normalise=True) == []  # empty rows: nothing divided by 0


@pytest.mark.parametrize("normalise", [False, True])
def test_confusion_figure_names_its_axes_the_background_and_writes_a_png(tmp_path, normalise):
    from PIL import Image

    fig = confusion_figure(CM, ["cat", "dog"], normalise, iou=0.5, conf=0.25)
    ax = fig.axes[0]
    assert ax.get_ylabel() == TRUE_AXIS == "true class"
    assert ax.get_xlabel() == PREDICTED_AXIS == "predicted class"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cat", "dog", BACKGROUND_ROW]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cat", "dog", BACKGROUND_COLUMN]
    assert "background" in BACKGROUND_ROW and "background" in BACKGROUND_COLUMN
    # the first row is the true cat: its cells sit at y 0, the column is what was predicted
    drawn = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert drawn == {(i, j): text for i, j, text, _ in confusion_cells(CM, normalise)}
    assert ("0.98" if normalise else "50") == drawn[(0, 0)]
    assert "row-normalised" in ax.get_title() if normalise else "counts" in ax.get_title()
    path = tmp_path / "m.png"
    fig.savefig(path, format="png")
    with Image.open(path) as im:
        assert im.format == "PNG" and min(im.size) >= 400


def test_one_name_per_iou_type_in_the_run_folder_and_in_eval_plots():
    from lucidyolo.tasks.registry import get_task

    # the run folder keys by results.csv letter, lucid eval by IoU type: each task names both the same
    for task, letter, iou_type, name in (("det", "B", "bbox", "box"), ("seg", "M", "segm", "mask"),
                                         ("keypoints", "P", "keypoints", "keypoints"),
                                         ("obb", "R", "rotated (per tile)", "obb")):
        names = get_task(task).metrics.plot_names
        assert plot_prefix(letter, names) == plot_prefix(iou_type, names) == name
    assert plot_prefix("C") == "C"  # a plugin's own letter is kept
    assert plot_prefix("my type (x)") == "my_type_x"


def test_eval_plots_use_the_run_folder_names(tmp_path):
    from lucidyolo.engine.commands.evaluate import add_curves
    from lucidyolo.metrics.matches import Matches

    m = Matches(
        scores=np.array([0.9, 0.8]), classes=np.array([0, 1]), tp=np.array([True, False]),
        ignored=np.array([False, False]), confused=np.array([-1, 0]), num_gt=np.array([1, 1]),
        names=("cat", "dog"),
    )
    paths = {"e2e": {"bbox": {"per_class": []}}, "nms": {"bbox": {"per_class": []}}}
    written = add_curves(paths, {"e2e": {"bbox": m}, "nms": {"bbox": m}}, tmp_path, {"bbox": "box"})
    names = {p.name for p in written}
    assert {"box_pr_curve.png", "box_confusion_matrix.png", "box_confusion_matrix_normalized.png",
            "box_curves.json", "nms_box_pr_curve.png"} <= names
    assert len(names) == 14


@pytest.mark.parametrize(("name", "expected"), [
    ("/data/coco128 [train]", ("coco128", "train")),
    ("/data/coco/annotations/instances_train2017.json [train2017]", ("coco", "train2017")),
    ("/data/set/data.yaml [val]", ("set", "val")),
    ("/home/u/.cache/lucidyolo/synthetic/det-v3-n200-s320-seed0 [train]", ("synthetic set", "train")),
    ("C:\\data\\dota\\ [train]", ("dota", "train")),
    ("my folders", ("my folders", "")),
])  # fmt: skip
def test_dataset_name_is_a_folder_name_not_a_path(name, expected):
    assert dataset_name(name) == expected


def _stats(split: str) -> dict:
    return {"split": split, "images": 8, "classes": ["a", "b"], "counted": "instances", "per_class": [3, 4],
            "instances": 7, "panels": {"classes": {"kind": "bars", "categories": ["a", "b"],
                                                   "series": {"instances": [3, 4]}, "title": "instances per class"}}}


def test_labels_title_names_the_dataset_and_split_without_the_cache_path():
    title = label_title(_stats("/home/u/.cache/lucidyolo/synthetic/det-v3-n200-s320-seed0 [train]"))
    assert title == "synthetic set (train split): 8 images, 7 instances, 2 classes"
    assert label_title(_stats("/mnt/big/coco128 [val]")).startswith("coco128 (val split): ")
    assert label_title(_stats("")).startswith("training split: ")


def test_labels_png_has_no_blank_bottom_third(tmp_path):
    from PIL import Image

    png = draw_label_stats(_stats("/d/x [train]"), tmp_path / "labels.png")
    with Image.open(png) as im:
        grey = np.asarray(im.convert("L"))
    inked = np.flatnonzero((grey < 250).any(axis=1))  # rows holding anything but white
    blank_below = grey.shape[0] - 1 - inked.max()
    assert blank_below < 0.1 * grey.shape[0], (blank_below, grey.shape)
