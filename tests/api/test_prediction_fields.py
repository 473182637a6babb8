"""A ``Prediction`` built from fabricated predict-hook dicts: field names, shapes, dtypes, drawing, JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lucidyolo.api.prediction import FieldLayout, Prediction, fields_from_rows, layout_of, plural
from lucidyolo.errors import NotAvailableError
from lucidyolo.tasks.segment.mask_assembly import encode_rle

H, W = 48, 64
NAMES = ["circle", "square"]


def _rows() -> list[dict]:
    """Three rows in the form the built-in hooks write: detection keys plus a mask, a rotated box, points."""
    masks = np.zeros((3, H, W), dtype=bool)
    masks[0, 2:10, 3:20] = True
    masks[1, 20:40, 30:60] = True  # row 2 keeps an empty mask
    rles = encode_rle(masks)
    return [
        {"box": [3.0, 2.0, 19.5, 9.25], "score": 0.91, "label": 1, "name": "square", "mask": rles[0],
         "rbox": [11.0, 5.5, 16.0, 7.0, 0.1], "keypoints": [[4.0, 3.0, 0.9], [18.0, 8.0, 0.4]]},
        {"box": [30.0, 20.0, 59.0, 39.0], "score": 0.5, "label": 0, "name": "circle", "mask": rles[1],
         "rbox": [44.5, 29.5, 29.0, 19.0, -0.3], "keypoints": [[31.0, 21.0, 1.0], [58.0, 38.0, 0.0]]},
        {"box": [0.0, 0.0, 1.0, 1.0], "score": 0.26, "label": 1, "name": "square", "mask": rles[2],
         "rbox": [0.5, 0.5, 1.0, 1.0, 0.0], "keypoints": [[0.0, 0.0, 0.3], [1.0, 1.0, 0.2]]},
    ], masks


def test_plural_names_of_hook_keys():
    assert [plural(k) for k in ("box", "score", "label", "mask", "rbox", "keypoints", "polygon", "rank", "patch")] == [
        "boxes", "scores", "labels", "masks", "rboxes", "keypoints", "polygons", "ranks", "patches"]


def test_layout_names_each_key_by_its_value_form():
    rows, _ = _rows()
    layout = layout_of(rows)
    assert "name" not in layout  # the class name is kept as label_names, not as a field
    assert layout["box"] == FieldLayout("box", "boxes", "tensor", (4,), "float32")
    assert layout["score"] == FieldLayout("score", "scores", "tensor", (), "float32")
    assert layout["label"] == FieldLayout("label", "labels", "tensor", (), "int64")
    assert layout["mask"].kind == "rle" and layout["mask"].name == "masks"
    assert layout["rbox"].shape == (5,) and layout["keypoints"].shape == (2, 3)


def test_fields_have_the_documented_shapes_dtypes_and_values():
    rows, masks = _rows()
    fields = fields_from_rows(rows, layout_of(rows), (H, W))
    assert fields["boxes"].shape == (3, 4) and fields["boxes"].dtype == torch.float32
    assert fields["scores"].shape == (3,) and fields["scores"].dtype == torch.float32
    assert fields["labels"].tolist() == [1, 0, 1] and fields["labels"].dtype == torch.int64
    assert fields["masks"].shape == (3, H, W) and fields["masks"].dtype == torch.bool
    assert torch.equal(fields["masks"], torch.from_numpy(masks))  # the RLE decodes to the mask it encodes
    assert fields["rboxes"].shape == (3, 5) and fields["keypoints"].shape == (3, 2, 3)
    assert fields["boxes"][0].tolist() == [3.0, 2.0, 19.5, 9.25]
    assert fields["keypoints"][1, 1].tolist() == [58.0, 38.0, 0.0]


def test_no_rows_give_empty_fields_of_the_same_layout():
    rows, _ = _rows()
    empty = fields_from_rows([], layout_of(rows), (H, W))
    assert {k: (tuple(v.shape), v.dtype) for k, v in empty.items()} == {
        "boxes": ((0, 4), torch.float32), "scores": ((0,), torch.float32), "labels": ((0,), torch.int64),
        "masks": ((0, H, W), torch.bool), "rboxes": ((0, 5), torch.float32), "keypoints": ((0, 2, 3), torch.float32),
    }


def test_a_plugins_keys_come_out_the_same_way():
    rows = [{"rank": 1, "label": 2, "name": "c", "score": 0.7, "flag": True, "note": "x", "part": [1, 2]},
            {"rank": 2, "label": 0, "name": "a", "score": 0.2, "flag": False, "note": "y", "part": [1]}]
    fields = fields_from_rows(rows, layout_of(rows), (H, W))
    assert fields["ranks"].tolist() == [1, 2] and fields["ranks"].dtype == torch.int64
    assert fields["flags"].dtype == torch.bool and fields["notes"] == ["x", "y"]
    assert fields["parts"] == [[1, 2], [1]]  # not one shape: a plain list


def _prediction(rows, drawer=None) -> Prediction:
    image = np.full((H, W, 3), 90, dtype=np.uint8)
    return Prediction(path=None, image=image, names=NAMES, fields=fields_from_rows(rows, layout_of(rows), (H, W)),
                      rows=rows, label_names=[r["name"] for r in rows], drawer=drawer)


def test_prediction_properties_json_and_drawing(tmp_path):
    rows, _ = _rows()

    def drawer(image, predictions):
        from PIL import Image

        out = image.copy()
        for p in predictions:
            x1, y1, x2, y2 = (int(v) for v in p["box"])
            out[y1:y2 + 1, x1:x2 + 1] = 255
        return Image.fromarray(out)

    pred = _prediction(rows, drawer)
    assert len(pred) == 3 and (pred.height, pred.width) == (H, W)
    assert pred.boxes.xyxy.shape == (3, 4) and pred.masks.data.shape == (3, H, W) and pred.rboxes.shape == (3, 5)
    assert pred.keypoints.data.shape == (3, 2, 3) and pred.label_names == ["square", "circle", "square"]
    assert [pred.names[i] for i in pred.labels.tolist()] == pred.label_names
    assert "3 rows" in repr(pred) and "masks (3, 48, 64) bool" in repr(pred)
    doc = pred.to_json()
    assert doc == json.loads(json.dumps(doc)) and doc["image"] is None
    assert (doc["height"], doc["width"], doc["predictions"]) == (H, W, rows)
    drawn = pred.plot()
    assert drawn.shape == (H, W, 3) and drawn.dtype == np.uint8 and (drawn != pred.image).any()
    assert (pred.image == 90).all()  # the input is left as it was
    saved = pred.save(tmp_path / "out" / "drawn.png")
    from PIL import Image

    assert np.array_equal(np.asarray(Image.open(saved)), drawn)  # PNG: lossless
    assert Image.open(pred.save(tmp_path / "drawn.jpg")).format == "JPEG"


def test_a_prediction_without_a_draw_hook_says_so():
    with pytest.raises(NotAvailableError):
        _prediction(_rows()[0]).plot()


def test_values_of_another_form_than_the_layout_are_kept_as_a_list():
    rows, _ = _rows()
    layout = layout_of(rows)
    odd = [dict(rows[0], box=[1.0, 2.0]), dict(rows[1], box=[1.0, 2.0])]  # 2 numbers where 4 were learnt
    fields = fields_from_rows(odd, layout, (H, W))
    assert fields["boxes"] == [[1.0, 2.0], [1.0, 2.0]] and fields["scores"].shape == (2,)
