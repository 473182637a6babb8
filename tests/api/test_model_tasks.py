"""``Model.new -> fit -> evaluate -> predict -> plot -> save -> to_json -> export`` for every task, plugin included.

Tiny runs: the task's own synthetic set (8 images at 64 px), its default preset, one
epoch of two batches, loading in-process. Scores are near zero; shapes, dtypes, value
ranges and files are what is checked.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lucidyolo import Model
from lucidyolo.errors import ConfigError, PluginError

IMG = 64
TASKS = ["det", "seg", "obb", "keypoints", "cls"]


def _spec(task: str):
    from lucidyolo.tasks.registry import get_task

    try:
        return get_task(task)
    except PluginError as err:  # the cls plugin is a separate distribution
        pytest.skip(f"task {task!r} is not installed: {err.what}")


def _val_images(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix == ".jpg" and "val" in p.relative_to(root).parts)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_new_fit_evaluate_predict_draw_export(task, tmp_path):
    spec = _spec(task)
    root = spec.make_synthetic(out_dir=tmp_path / "data", num_images=8, img_size=IMG, seed=0)
    model = Model.new(task)
    assert not model.trained and model.task == spec.name

    fit = model.fit(root, config=spec.default_preset, data={"img_size": IMG, "batch_size": 4, "num_workers": 0},
                    trainer__max_epochs=1, **{"trainer.limit_train_batches": 2,
                                              "trainer.default_root_dir": str(tmp_path / "runs")})
    assert fit.run_dir == tmp_path / "runs" / "version_0" and fit.best.is_file()
    assert fit.best.is_relative_to(fit.run_dir) and model.checkpoint == fit.best and model.trained
    assert spec.metrics.monitor in fit.metrics and all(math.isfinite(v) for v in fit.metrics.values())
    assert fit.transfer is None and fit.config["data"]["img_size"] == IMG and fit.config["model"]["task"] == spec.name
    assert model.img_size == IMG and model.class_names

    if task == "keypoints":  # the synthetic set has 7 points; the COCO protocol scores 17 (as `lucid eval` says)
        with pytest.raises(ConfigError, match="17 person points"):
            model.evaluate(device="cpu")
    else:
        report = model.evaluate(device="cpu")
        assert report.task == spec.name and report.img_size == IMG and report.report["checkpoint"] == str(fit.best)
        assert report.stats and report.metrics and all(math.isfinite(v) for v in report.metrics.values())
        assert json.loads(json.dumps(report.to_json())) == report.to_json()

    files = _val_images(root)
    preds = model.predict(files, conf=0.0, device="cpu")
    assert [p.path for p in preds] == files
    for p in preds:
        n, h, w = len(p), p.height, p.width
        assert n > 0 and p.image.shape == (h, w, 3) and (h, w) == (IMG, IMG)
        assert p.scores.shape == (n,) and p.scores.dtype == torch.float32
        assert ((p.scores >= 0) & (p.scores <= 1)).all()
        assert p.labels.shape == (n,) and p.labels.dtype == torch.int64
        assert ((p.labels >= 0) & (p.labels < len(model.class_names))).all()
        assert p.names == model.names == dict(enumerate(model.class_names))
        assert all(t.shape[0] == n for t in p.fields.values() if isinstance(t, torch.Tensor))
        if task == "cls":  # the plugin's top classes, best first: no boxes
            assert p.boxes is None and p.fields["ranks"].tolist() == list(range(1, n + 1))
            assert (p.scores[:-1] >= p.scores[1:]).all()
        else:
            assert p.boxes.xyxy.shape == (n, 4) and p.boxes.xyxy.dtype == torch.float32
            assert torch.equal(p.boxes.conf, p.scores) and torch.equal(p.boxes.cls, p.labels)
            x1, y1, x2, y2 = p.boxes.xyxy.unbind(-1)
            assert ((x1 <= x2) & (y1 <= y2)).all()
            if task != "obb":  # obb's box is the rotated box's envelope, which may overhang the image
                assert ((x1 >= 0) & (x2 <= w) & (y1 >= 0) & (y2 <= h)).all()
        if task == "seg":
            assert p.masks.data.shape == (n, h, w) and p.masks.data.dtype == torch.bool
            outlines = p.masks.xy
            assert len(outlines) == n and all(o.ndim == 2 and o.shape[1] == 2 for o in outlines)
        if task == "obb":
            assert p.rboxes.shape == (n, 5) and p.rboxes.dtype == torch.float32 and (p.rboxes[:, 2:4] >= 0).all()
            corners = p.fields["polygons"]  # (N, 4, 2): the box is their envelope
            assert corners.shape == (n, 4, 2)
            envelope = torch.cat([corners.amin(1), corners.amax(1)], -1)
            assert torch.allclose(envelope, p.boxes.xyxy, atol=0.02)
            assert torch.equal(p.obb.xywhr, p.rboxes) and torch.equal(p.obb.xyxyxyxy, corners)
            assert torch.allclose(p.obb.xyxy, envelope)
        if task == "keypoints":
            assert p.keypoints.data.shape == (n, 7, 3) and p.keypoints.data.dtype == torch.float32
            assert p.keypoints.xy.shape == (n, 7, 2) and p.keypoints.conf.shape == (n, 7)
        if task not in ("seg", "obb", "keypoints"):
            assert p.masks is None and p.rboxes is None and p.obb is None and p.keypoints is None

        drawn = p.plot()
        assert drawn.shape == p.image.shape and drawn.dtype == np.uint8 and (drawn != p.image).any()
        saved = p.save(tmp_path / "drawn" / f"{p.path.stem}.jpg")
        from PIL import Image

        assert Image.open(saved).size == (w, h)
        doc = p.to_json()
        assert json.loads(json.dumps(doc)) == doc and doc["image"] == str(p.path) and doc["predictions"] == p.rows

    # lucid predict --save-txt / --save-json on real rows of the task: a line per row, results pycocotools loads
    first, hw = preds[0], (preds[0].height, preds[0].width)
    lines = spec.label_lines(predictions=first.rows, image_hw=hw, class_names=model.class_names, meta={})
    assert len(lines) == len(first) and [int(line.split()[0]) for line in lines] == first.labels.tolist()
    if spec.coco_results is not None:
        from pycocotools.coco import COCO

        results = spec.coco_results(predictions=first.rows, image_id=1, image_hw=hw, class_names=model.class_names,
                                    meta={})
        gt = COCO()
        gt.dataset = {"images": [{"id": 1, "height": hw[0], "width": hw[1]}], "annotations": [],
                      "categories": [{"id": c, "name": n} for c, n in enumerate(model.class_names)]}
        gt.createIndex()
        assert 0 < len(gt.loadRes(results).getAnnIds()) == len(results) <= len(first)

    array = model.predict(preds[0].image, conf=0.0, device="cpu", channels="rgb")[0]  # in memory: the same answer
    assert array.rows == preds[0].rows and array.path is None
    nothing = model.predict(files[0], conf=1.0, device="cpu")[0]
    assert len(nothing) == 0 and set(nothing.fields) == set(preds[0].fields)
    assert all(v.shape[0] == 0 for v in nothing.fields.values() if isinstance(v, torch.Tensor))

    onnx = model.export("onnx", check=True)
    assert onnx.path == fit.best.with_suffix(".onnx") and onnx.path.stat().st_size == onnx.details["bytes"]
    assert onnx.details["outputs"] == list(spec.export.outputs) and onnx.details["parity"]["passed"]
