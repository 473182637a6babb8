"""The attribute paths other YOLO trainers' users write (issue 44 item 1), on an untrained 64 px det checkpoint.

``Model(path)``, ``model(img)``, ``model.names``, ``model.val()`` with ``report.box.map``, result views
(``boxes.xyxy`` ...), ``show()`` / ``save()`` / ``to_df()``, BGR numpy input, ``stream=True`` (folders and
videos), ``fit()``'s epoch lines by default and its Ctrl-C line. Nothing trains here.
"""

from __future__ import annotations

import math
import signal
import sys
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from lucidyolo import Model
from lucidyolo.api.accessors import Boxes, Keypoints, Masks
from lucidyolo.api.prediction import Prediction, fields_from_rows, layout_of
from lucidyolo.data.synth import SHAPE_CLASSES
from lucidyolo.errors import NotAvailableError, RunInterrupted, UserError
from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    return write_tiny_run(tmp_path_factory.mktemp("familiar"))


@pytest.fixture(scope="module")
def loaded(tiny) -> Model:
    return Model(tiny[0])


def _files(root: Path) -> list[Path]:
    return sorted((root / "val").glob("*.jpg"))


def test_the_constructor_loads_and_names_is_a_dict(tiny, loaded):
    assert loaded.checkpoint == tiny[0] and loaded.task == "det" and loaded.trained
    assert repr(loaded) == repr(Model.load(tiny[0]))
    assert loaded.names == dict(enumerate(SHAPE_CLASSES))
    assert Model.new("det").names == {} and Model.new("det", names=["a", "b"]).names == {0: "a", 1: "b"}
    with pytest.raises(UserError, match="does not exist|no checkpoint|not found"):
        Model(tiny[0].parent / "missing.ckpt")


def test_calling_the_model_predicts_and_arrays_are_bgr_by_default(tiny, loaded):
    from lucidyolo.data.image_io import read_image_fast

    file = _files(tiny[1])[0]
    rgb = read_image_fast(file)  # what `lucid predict` reads
    by_file = loaded(file, conf=0.0, device="cpu")[0]
    assert by_file.rows == loaded.predict(file, conf=0.0, device="cpu")[0].rows
    bgr = np.ascontiguousarray(rgb[..., ::-1])  # what cv2.imread gives
    from_bgr = loaded(bgr, conf=0.0, device="cpu")[0]
    from_rgb = loaded(rgb, conf=0.0, device="cpu", channels="RGB")[0]
    assert from_bgr.rows == from_rgb.rows == by_file.rows
    assert np.array_equal(from_bgr.image, rgb)  # held as RGB either way
    swapped = loaded(rgb, conf=0.0, device="cpu")[0]  # an RGB array read as BGR: other pixels, so other rows
    assert np.array_equal(swapped.image, bgr)
    with pytest.raises(UserError, match=r"Model.predict got channels='hsv'.*channels='bgr'"):
        loaded(rgb, channels="hsv")


def test_boxes_have_the_familiar_views(tiny, loaded):
    p = loaded(tiny[1] / "val", conf=0.0, device="cpu")[0]
    n = len(p)
    assert n > 0 and p.orig_shape == (p.height, p.width) and p.names[0] == SHAPE_CLASSES[0]
    b = p.boxes
    assert isinstance(b, Boxes) and len(b) == n and b.shape == (n, 6)
    assert torch.equal(b.xyxy, p.fields["boxes"]) and torch.equal(b.conf, p.scores) and torch.equal(b.cls, p.labels)
    assert b.cls.dtype == torch.int64 and b.conf.dtype == torch.float32
    x1, y1, x2, y2 = b.xyxy.unbind(-1)
    assert torch.allclose(b.xywh, torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], -1))
    assert torch.allclose(b.xyxyn * torch.tensor([p.width, p.height] * 2), b.xyxy)
    assert torch.equal(b.data[:, :4], b.xyxy) and torch.equal(b.data[:, 5].long(), b.cls)
    rows = list(b)  # one view per row, each keeping its row dimension
    assert len(rows) == n and all(isinstance(r, Boxes) and r.xyxy.shape == (1, 4) for r in rows)
    assert torch.equal(rows[1].xyxy[0], b.xyxy[1]) and float(rows[1].conf[0]) == float(b.conf[1])
    assert p.names[int(rows[0].cls[0])] == p.label_names[0]
    top = b[b.conf >= b.conf.median()]
    assert isinstance(top, Boxes) and len(top) == int((b.conf >= b.conf.median()).sum())
    assert b.cpu() is b and len(b[:2]) == min(2, n)
    assert p.masks is None and p.obb is None and p.keypoints is None  # det predicts none of them


def test_show_save_json_and_df(tiny, loaded, tmp_path, monkeypatch):
    from PIL import Image

    file = _files(tiny[1])[0]
    p = loaded(file, conf=0.0, device="cpu")[0]
    monkeypatch.chdir(tmp_path)
    saved = p.save()
    assert saved == Path(f"{file.stem}_pred.jpg") and Image.open(tmp_path / saved).size == (p.width, p.height)
    array = loaded(p.image, conf=0.0, device="cpu", channels="rgb")[0]
    assert array.save() == Path("image_pred.jpg")
    shown = []
    monkeypatch.setattr(Image.Image, "show", lambda self, title=None: shown.append((self.size, title)))
    p.show()
    assert shown == [((p.width, p.height), f"{file.stem}_pred.jpg")]
    assert np.array_equal(p.plot(channels="bgr"), p.plot()[..., ::-1])
    doc = p.to_json()
    assert isinstance(doc, dict) and doc["predictions"] == p.rows

    monkeypatch.setitem(sys.modules, "pandas", None)  # pandas missing
    with pytest.raises(NotAvailableError, match="pip install pandas"):
        p.to_df()
    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda records: ("frame", records)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pandas", fake)
    assert p.to_df() == ("frame", p.rows)


def test_stream_yields_lazily_for_folders_and_videos(tiny, loaded, tmp_path):
    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.predict.video import VideoWriter

    files = _files(tiny[1])
    listed = loaded(tiny[1] / "val", conf=0.0, device="cpu")
    gen = loaded(tiny[1] / "val", conf=0.0, device="cpu", stream=True, batch_size=1)
    assert not isinstance(gen, list)
    first = next(gen)  # one batch read so far
    assert first.path == files[0] and first.rows == listed[0].rows
    assert [p.rows for p in gen] == [p.rows for p in listed[1:]]
    with pytest.raises(UserError, match="matches no image"):  # a bad source is refused at the call, not later
        loaded("/nonexistent/*.jpg", stream=True)

    video = tmp_path / "clip.mp4"
    frames = [read_image_fast(f) for f in files] * 2
    with video.open("wb") as out:
        writer = VideoWriter(out, Fraction(5), *frames[0].shape[:2])
        for f in frames:
            writer.write(f)
        writer.close()
    with pytest.raises(UserError, match=r"is a video.*stream=True"):
        loaded(video, device="cpu")
    preds = list(loaded([video, files[0]], conf=0.0, device="cpu", stream=True, batch_size=3))
    assert [(p.path, p.frame) for p in preds] == [(video, i) for i in range(len(frames))] + [(files[0], None)]
    assert all(p.image.shape == frames[0].shape for p in preds)
    assert preds[0].default_filename() == "clip_000000_pred.jpg" and preds[0].to_json()["frame"] == 0
    assert "frame 0" in repr(preds[0])


def test_val_gives_typed_metric_families(loaded):
    report = loaded.val(device="cpu")
    box = report.box
    assert box.kind == "bbox" and box.path == report.default_path
    assert box.map == report.stats["AP"] and box.map50 == report.stats["AP50"] and box.map75 == report.stats["AP75"]
    assert box.maps.shape == (len(SHAPE_CLASSES),) and box.maps50.shape == (len(SHAPE_CLASSES),)
    for row in box.per_class:
        i = SHAPE_CLASSES.index(row["name"])
        assert (math.isnan(box.maps[i]) if row["ap"] < 0 else box.maps[i] == row["ap"])
    assert report.family("bbox", "nms").stats == report.stats_of("nms", "bbox")
    with pytest.raises(AttributeError, match="metric families: box"):
        report.seg  # noqa: B018
    with pytest.raises(KeyError, match="scored"):
        report.family("segm")


def _fake_prediction() -> Prediction:
    h, w = 40, 50
    mask = np.zeros((h, w), bool)
    mask[10:20, 5:25] = True
    from pycocotools import mask as mask_utils

    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode("ascii")
    rows = [{"box": [5.0, 10.0, 25.0, 20.0], "score": 0.9, "label": 1, "name": "b", "mask": rle,
             "rbox": [15.0, 15.0, 20.0, 10.0, 0.0], "keypoints": [[6.0, 11.0, 0.8], [24.0, 19.0, 0.2]]}]
    fields = fields_from_rows(rows, layout_of(rows), (h, w))
    return Prediction(path=None, image=np.zeros((h, w, 3), np.uint8), names=["a", "b"], fields=fields, rows=rows,
                      label_names=["b"])


def test_masks_obb_and_keypoints_views():
    p = _fake_prediction()
    assert p.names == {0: "a", 1: "b"}
    m = p.masks
    assert isinstance(m, Masks) and m.data.shape == (1, 40, 50) and m.data.dtype == torch.bool
    (outline,) = m.xy
    assert outline.dtype == np.float32 and outline.shape[1] == 2
    # the 0.5 level between pixel centres: half a pixel inside the mask's pixel edges
    assert outline[:, 0].min() == pytest.approx(4.5) and outline[:, 0].max() == pytest.approx(24.5)
    assert outline[:, 1].min() == pytest.approx(9.5) and outline[:, 1].max() == pytest.approx(19.5)
    assert np.allclose(m.xyn[0], outline / np.array([50, 40]))
    o = p.obb
    assert torch.equal(o.xywhr, p.rboxes) and o.data.shape == (1, 7) and int(o.cls[0]) == 1
    assert torch.allclose(o.xyxy, torch.tensor([[5.0, 10.0, 25.0, 20.0]]))  # angle 0: the envelope is the box
    k = p.keypoints
    assert isinstance(k, Keypoints) and k.xy.shape == (1, 2, 2) and k.conf.shape == (1, 2)
    assert k.xy[0, 1].tolist() == [24.0, 19.0] and k.conf[0].tolist() == pytest.approx([0.8, 0.2])
    assert k[0].data.shape == (1, 2, 3)


class _FakeFit:
    def __init__(self, best: Path, stop: RunInterrupted | None = None) -> None:
        self.best, self.stop = best, stop

    def __call__(self, spec, cfg, log=None, **_):
        if log is not None:
            log("[bold]epoch 1/1[/bold] | loss box 1.0")
        if self.stop is not None:
            raise self.stop
        return {"best": str(self.best), "run_dir": str(self.best.parent), "metrics": {}}


def test_fit_prints_the_epoch_lines_unless_verbose_is_false(tiny, monkeypatch, capsys):
    import lucidyolo.engine.loop.fit as fit_mod

    monkeypatch.setattr(fit_mod, "run_fit", _FakeFit(tiny[0]))
    model = Model(tiny[0])
    model.fit(tiny[1])
    assert capsys.readouterr().out == "epoch 1/1 | loss box 1.0\n"  # plain text, as `lucid fit` shows it
    model.fit(tiny[1], verbose=False)
    assert capsys.readouterr().out == ""
    lines: list[str] = []
    model.fit(tiny[1], verbose=False, log=lines.append)
    assert lines == ["epoch 1/1 | loss box 1.0"] and capsys.readouterr().out == ""


def test_ctrl_c_in_fit_is_one_line_and_a_short_keyboard_interrupt(tiny, monkeypatch, capsys):
    import lucidyolo.engine.loop.fit as fit_mod

    stop = RunInterrupted(signal.SIGINT, resume="lucid fit det --resume runs/version_0")
    monkeypatch.setattr(fit_mod, "run_fit", _FakeFit(tiny[0], stop))
    with pytest.raises(KeyboardInterrupt) as err:
        Model(tiny[0]).fit(tiny[1])
    line = ("Stopped by Ctrl-C (SIGINT). Fix: Continue from the last finished epoch with "
            "`lucid fit det --resume runs/version_0`.")
    assert str(err.value) == line and err.value.resume == stop.resume
    assert err.value.__suppress_context__ and err.value.__cause__ is None  # no chained Lightning traceback
    assert capsys.readouterr().err.strip() == line
    term = RunInterrupted(signal.SIGTERM, resume="x")
    monkeypatch.setattr(fit_mod, "run_fit", _FakeFit(tiny[0], term))
    with pytest.raises(RunInterrupted):  # SIGTERM is not a Ctrl-C: it stays the engine's signal stop
        Model(tiny[0]).fit(tiny[1], verbose=False)
