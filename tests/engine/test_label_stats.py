"""Label statistics (``labels.json`` / ``labels.png``): hand-counted goldens on a tiny hand-made split.

Every expected number below was counted by hand from the boxes, visibilities,
angles and ring lengths written here, not produced by the implementation.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

from lucidyolo.data.source import ImageSource
from lucidyolo.engine.run.label_stats import GRID, label_statistics, summary_line, write_label_stats
from lucidyolo.structures.polygons import Polygons

# Three images: 0 is 200 wide x 100 high with two boxes, 1 (50 x 50) is background, 2 (80 x 40) has three
# boxes and one crowd region (an ignore region, not an instance). Box corners are exact in float32.
BOXES = [
    [7.5, 26.25, 42.5, 48.75],  # image 0, class 0: centre (25, 37.5) -> (0.125, 0.375); size 35 x 22.5 -> (0.175, 0.225)
    [142.5, 46.5, 167.5, 63.5],  # image 0, class 2: centre (155, 55) -> (0.775, 0.55); size 25 x 17 -> (0.125, 0.17)
    [0, 5, 20, 15],  # image 2, class 0: centre (10, 10) -> (0.125, 0.25); size 20 x 10 -> (0.25, 0.25)
    [65, 26, 75, 36],  # image 2, class 0: centre (70, 31) -> (0.875, 0.775); size 10 x 10 -> (0.125, 0.25)
    [21, 11, 63, 33],  # image 2, class 1: centre (42, 22) -> (0.525, 0.55); size 42 x 22 -> (0.525, 0.55)
    [0, 0, 80, 40],  # image 2, class 1: a crowd region
]
LABELS = [0, 2, 0, 0, 1, 1]
CROWD = [False, False, False, False, False, True]


def _source(extra=None, image_extra=None, boxes=BOXES, labels=LABELS, offsets=(0, 2, 2, 6)) -> ImageSource:
    n = len(offsets) - 1
    return ImageSource(
        fields=tuple(extra or ()), class_names=["a", "b", "c"], category_ids=[0, 1, 2], root="/nowhere",
        rel_paths=[f"{i}.jpg" for i in range(n)], image_ids=np.arange(n), hw=[[100, 200], [50, 50], [40, 80]][:n],
        inst_offsets=list(offsets), boxes=np.asarray(boxes, np.float32).reshape(-1, 4), labels=labels,
        difficult=np.zeros(len(labels), bool), extra=extra, image_extra=image_extra, name="hand-made",
    )


def _nonzero_bins(counts) -> dict[tuple[int, int], int]:
    c = np.asarray(counts)
    return {(int(i), int(j)): int(c[i, j]) for i, j in zip(*np.nonzero(c), strict=True)}


def test_generic_numbers_are_the_hand_counted_ones():
    stats = label_statistics(_source(extra={"crowd": CROWD}))
    assert stats["counted"] == "instances" and stats["images"] == 3 and stats["instances"] == 5
    assert stats["per_class"] == [3, 1, 1]  # the crowd region of class 1 is not an instance
    assert stats["images_without_instances"] == 1
    assert stats["instances_per_image"] == {"mean": pytest.approx(5 / 3), "max": 3}
    centre, size = stats["panels"]["box_centre"], stats["panels"]["box_size"]
    assert np.shape(centre["counts"]) == (GRID, GRID) and centre["x_edges"][1] == pytest.approx(0.05)
    # bins of 0.05: x bin = floor(x / 0.05), y bin = floor(y / 0.05)
    assert _nonzero_bins(centre["counts"]) == {(2, 7): 1, (15, 11): 1, (2, 5): 1, (17, 15): 1, (10, 11): 1}
    assert _nonzero_bins(size["counts"]) == {(3, 4): 1, (2, 3): 1, (5, 5): 1, (2, 5): 1, (10, 11): 1}
    assert stats["panels"]["classes"]["series"] == {"instances": [3, 1, 1]}
    assert summary_line(stats, "runs/x/labels.png") == "label statistics: runs/x/labels.png (3 classes, 5 instances)"


def test_all_instances_reads_every_image_without_decoding_and_drops_ignore_regions():
    targets, image_index = _source(extra={"crowd": CROWD}).all_instances()  # root /nowhere: nothing could be read
    assert image_index.tolist() == [0, 0, 2, 2, 2] and targets.labels.tolist() == [0, 2, 0, 0, 1]


def test_a_split_without_instances_counts_images_per_class():
    src = _source(boxes=np.zeros((0, 4)), labels=[], offsets=(0, 0, 0, 0),
                  image_extra={"image_class": np.array([2, 0, 2])})
    stats = label_statistics(src)
    assert stats["counted"] == "images" and stats["per_class"] == [1, 0, 2]
    assert stats["instances"] is None and set(stats["panels"]) == {"classes"}
    assert summary_line(stats, "labels.png").endswith("(3 classes, 3 images)")


def test_keypoint_visibility_per_index():
    from lucidyolo.tasks.keypoints.hooks import label_stats

    vis = np.array([[2, 2, 0, 1], [0, 0, 0, 0], [1, 2, 2, 0]], np.float32)  # (M=3, K=4)
    panel = label_stats(instances={"visibility": vis, "keypoints": np.zeros((3, 4, 2))})["keypoint_visibility"]
    assert panel["categories"] == ["0", "1", "2", "3"]
    assert panel["series"]["labelled (v > 0)"].tolist() == [2, 2, 1, 1]
    assert panel["series"]["visible (v = 2)"].tolist() == [1, 2, 1, 0]
    assert panel["summary"] == {"instances": 3, "instances_without_keypoints": 1}


def test_obb_angle_histogram_in_ten_degree_bins():
    from lucidyolo.tasks.obb.hooks import label_stats

    degrees = [0, 0, 30, 90, -45, 130]
    rboxes = np.zeros((6, 5), np.float32)
    rboxes[:, 4] = np.radians(degrees)
    panel = label_stats(instances={"rboxes": rboxes})["angle"]
    assert panel["edges"].tolist() == list(range(-45, 136, 10))
    expected = [0] * 18
    for b in (4, 4, 7, 13, 0, 17):  # [-5, 5), [-5, 5), [25, 35), [85, 95), [-45, -35), [125, 135]
        expected[b] += 1
    assert panel["counts"].tolist() == expected
    assert panel["summary"] == {"axis_aligned": 3}  # 0, 0 and 90


def test_polygon_vertices_one_bin_per_count_then_wider():
    from lucidyolo.tasks.segment.hooks import label_stats

    rings = [np.zeros((n, 2)) for n in (3, 4, 4, 7, 3)]
    panel = label_stats(instances={"polygons": Polygons.from_rings(rings, [0, 0, 1, 2, 3])})["polygon_vertices"]
    assert panel["edges"].tolist() == [2.5, 3.5, 4.5, 5.5, 6.5, 7.5]
    assert panel["counts"].tolist() == [2, 2, 0, 0, 1]
    assert panel["summary"] == {"polygons": 5, "mean": pytest.approx(4.2), "max": 7,
                                "instances_with_several_polygons": 1}
    wide = label_stats(instances={"polygons": Polygons.from_rings([np.zeros((3, 2)), np.zeros((62, 2))], [0, 1])})
    edges, counts = wide["polygon_vertices"]["edges"], wide["polygon_vertices"]["counts"]
    assert len(counts) == 30 and edges[0] == 2.5 and edges[-1] == 62.5  # 60 counts, two per bin
    assert counts[0] == 1 and counts[-1] == 1 and counts.sum() == 2


def test_hook_panels_are_checked_and_written_with_a_valid_picture(tmp_path):
    def hook(instances, image_index, image_hw, class_names, meta, **_):
        assert image_index.tolist() == [0, 0, 2, 2, 2] and image_hw.shape == (3, 2) and class_names == ["a", "b", "c"]
        return {"widths": {"kind": "histogram", "edges": np.array([0.0, 50.0, 100.0]),
                           "counts": np.histogram(instances["boxes"][:, 2] - instances["boxes"][:, 0], [0, 50, 100])[0]}}

    stats = label_statistics(_source(extra={"crowd": CROWD}), hook, {})
    assert stats["panels"]["widths"]["counts"] == [5, 0] and stats["panels"]["widths"]["title"] == "widths"
    png, written = write_label_stats(stats, tmp_path)
    assert json.loads(written.read_text()) == stats
    with Image.open(png) as im:
        im.verify()
        assert im.format == "PNG" and im.size[0] > 600
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, no temporary left

    bad = {"x": {"kind": "histogram", "edges": [0, 1], "counts": [1, 2]}}
    with pytest.raises(ValueError, match="2 edges for 2 bins"):
        label_statistics(_source(), lambda **_: bad)
    with pytest.raises(ValueError, match="clashes"):
        label_statistics(_source(), lambda **_: {"classes": {"kind": "bars", "categories": [], "series": {}}})
    assert math.isfinite(stats["instances_per_image"]["mean"])


def test_the_picture_of_statistics_drawn_before_is_copied_not_drawn(tmp_path, monkeypatch):
    import lucidyolo.engine.run.label_plots as label_plots

    monkeypatch.setenv("LUCIDYOLO_INDEX_DIR", str(tmp_path / "index"))
    monkeypatch.delenv("LUCIDYOLO_LABEL_INDEX", raising=False)
    stats = label_statistics(_source(), None, {})
    first, _ = write_label_stats(stats, tmp_path / "run1")

    def no_drawing(*args, **kwargs):
        raise AssertionError("drawn again")

    monkeypatch.setattr(label_plots, "draw_label_stats", no_drawing)
    second, _ = write_label_stats(stats, tmp_path / "run2")
    assert second.read_bytes() == first.read_bytes()
    other = label_statistics(_source(labels=[1, 2, 0, 0, 1, 1]), None, {})  # other statistics: a new picture
    with pytest.raises(AssertionError, match="drawn again"):
        write_label_stats(other, tmp_path / "run3")
    monkeypatch.setenv("LUCIDYOLO_LABEL_INDEX", "off")  # no index folder: always drawn
    with pytest.raises(AssertionError, match="drawn again"):
        write_label_stats(stats, tmp_path / "run4")
