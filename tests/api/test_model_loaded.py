"""``Model.load`` on an untrained det checkpoint that trained at 64 px (no training here): fast checks.

Predict shares ``lucid predict``'s code path (the same rows for a path, an array and a
PIL image), ``fit`` resolves its config as ``lucid fit`` (``run_fit`` is replaced by a
recorder, so nothing trains), evaluate and export wrap the commands' functions.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from lucidyolo import Model
from lucidyolo.data.synth import SHAPE_CLASSES
from lucidyolo.errors import ConfigError, DataError
from tests.cli.tiny_run import IMG_SIZE, write_tiny_run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    return write_tiny_run(tmp_path_factory.mktemp("api"))


@pytest.fixture(scope="module")
def loaded(tiny) -> Model:
    return Model.load(tiny[0])


def _val_images(root: Path) -> list[Path]:
    return sorted((root / "val").glob("*.jpg"))


def test_load_reads_task_variant_names_and_size_from_the_file(tiny, loaded):
    assert loaded.task == "det" and loaded.variant == "n" and loaded.trained
    assert loaded.checkpoint == tiny[0] and loaded.class_names == list(SHAPE_CLASSES)
    assert loaded.img_size == IMG_SIZE and loaded.config is not None
    assert isinstance(loaded.torch_model, torch.nn.Module)
    assert repr(loaded) == f"Model(task='det', variant='n', checkpoint={str(tiny[0])!r})"


def test_predict_gives_the_rows_of_lucid_predict_as_tensors_in_image_pixels(tiny, loaded):
    from PIL import Image

    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.engine.commands.predict import run_predict

    ckpt, root = tiny
    files = _val_images(root)
    cli = run_predict(ckpt, str(root / "val"), conf=0.0, device="cpu")
    preds = loaded.predict(root / "val", conf=0.0, device="cpu")
    assert [p.path for p in preds] == files and [p.to_json() for p in preds] == cli  # one code path
    total = 0
    for p in preds:
        n = len(p)
        total += n
        assert p.image.shape == (p.height, p.width, 3) and p.image.dtype == np.uint8
        assert p.boxes.xyxy.shape == (n, 4) and p.boxes.xyxy.dtype == torch.float32
        assert p.scores.shape == (n,) and p.labels.shape == (n,) and p.labels.dtype == torch.int64
        assert ((p.scores >= 0) & (p.scores <= 1)).all() and ((p.labels >= 0) & (p.labels < len(p.names))).all()
        x1, y1, x2, y2 = p.boxes.xyxy.unbind(-1)
        assert ((x1 >= 0) & (x1 <= x2) & (x2 <= p.width) & (y1 >= 0) & (y1 <= y2) & (y2 <= p.height)).all()
        assert p.masks is None and p.rboxes is None and p.keypoints is None  # det gives none of them
        assert p.names == dict(enumerate(SHAPE_CLASSES)) and p.label_names == [p.names[i] for i in p.labels.tolist()]
    assert total > 0

    image = read_image_fast(files[0])  # the pixels `lucid predict` reads
    from_array = loaded.predict(image, conf=0.0, device="cpu", channels="rgb")[0]
    from_pil = loaded.predict(Image.fromarray(image), conf=0.0, device="cpu")[0]
    assert from_array.path is None and from_array.to_json()["image"] is None
    assert from_array.rows == from_pil.rows == preds[0].rows
    grey = loaded.predict(image[..., 0], conf=0.0, device="cpu")[0]  # (H, W) is repeated into RGB
    assert grey.image.shape == image.shape
    two = loaded.predict([image, files[0]], conf=0.0, device="cpu", channels="rgb")
    assert [p.path for p in two] == [None, files[0]] and two[1].rows == preds[0].rows


def test_an_empty_answer_still_has_every_field(loaded, tiny):
    empty = Model.load(tiny[0]).predict(_val_images(tiny[1])[0], conf=1.0, device="cpu")[0]  # no layout seen yet
    assert len(empty) == 0 and empty.rows == []
    assert {k: (tuple(v.shape), v.dtype) for k, v in empty.fields.items()} == {
        "boxes": ((0, 4), torch.float32), "scores": ((0,), torch.float32), "labels": ((0,), torch.int64)}
    assert np.array_equal(empty.plot(), empty.image)  # nothing drawn


def test_evaluate_scores_at_the_training_size(loaded, tmp_path):
    report = loaded.evaluate(device="cpu", output=tmp_path / "eval.json")
    assert report.task == "det" and report.img_size == IMG_SIZE
    assert set(report.paths) == {"e2e", "nms"} and set(report.stats) >= {"AP", "AP50"}
    assert report.stats == report.stats_of("e2e", "bbox")
    assert report.metrics["nms/bbox/AP50"] == report.stats_of("nms")["AP50"]
    assert json.loads((tmp_path / "eval.json").read_text()) == report.to_json()
    assert json.loads(json.dumps(report.to_json())) == report.to_json()
    assert loaded.evaluate(device="cpu", img_size=96, limit=1).img_size == 96


def test_run_folders_and_weights_files_load_too(tiny, tmp_path):
    ckpt, root = tiny
    run = tmp_path / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    best = Path(shutil.copy(ckpt, run / "checkpoints" / "best.ckpt"))
    assert Model.load(run).checkpoint == best
    exported = Model.load(run).export("weights", output=tmp_path / "slim.pt")
    assert exported.path == tmp_path / "slim.pt" and exported.format == "weights" and exported.path.is_file()
    slim = Model.load(exported.path)
    image = _val_images(root)[0]
    assert slim.predict(image, conf=0.0, device="cpu")[0].rows == Model.load(ckpt).predict(
        image, conf=0.0, device="cpu")[0].rows


class _Recorder:
    """Stands in for ``run_fit``: keeps the resolved config, returns the given checkpoint as the best."""

    def __init__(self, best: Path, run_dir: Path) -> None:
        self.best, self.run_dir, self.calls = best, run_dir, []

    def __call__(self, spec, cfg, **kwargs):
        self.calls.append(cfg)
        return {"run_dir": self.run_dir, "best": str(self.best), "metrics": {"val/mAP50": 0.5}, "transfer": None}


@pytest.fixture
def recorder(monkeypatch, tiny, tmp_path):
    import lucidyolo.engine.loop.fit as fit_module

    rec = _Recorder(tiny[0], tmp_path / "run")
    monkeypatch.setattr(fit_module, "run_fit", rec)
    return rec


def test_fit_of_a_loaded_model_fine_tunes_from_it_with_every_override_spelling(recorder, tiny, tmp_path):
    ckpt, root = tiny
    model = Model.load(ckpt)
    result = model.fit(root, trainer={"max_epochs": 3}, trainer__limit_train_batches=2,
                       **{"data.img_size": 96, "data.num_workers": 0}, seed=5)
    (cfg,) = recorder.calls
    assert cfg.model.weights == str(ckpt) and cfg.model.variant == "n" and cfg.data.data_root == root
    assert (cfg.trainer.max_epochs, cfg.trainer.limit_train_batches, cfg.data.img_size, cfg.seed) == (3, 2, 96, 5)
    assert result.best == ckpt and result.run_dir == tmp_path / "run" and result.metrics == {"val/mAP50": 0.5}
    assert result.transfer is None and result.config["trainer"]["max_epochs"] == 3
    assert model.checkpoint == ckpt  # the model is the run's best checkpoint now
    model.fit(root, weights=tmp_path / "other.ckpt", model__freeze="backbone")
    assert recorder.calls[-1].model.weights == str(tmp_path / "other.ckpt")
    assert recorder.calls[-1].model.freeze == "backbone"


def test_fit_without_data_takes_the_embedded_recipe_like_lucid_fit(recorder):
    Model.new("detect").fit(trainer__max_epochs=1)
    cfg = recorder.calls[-1]
    assert cfg.model.task == "det" and cfg.data.data_root is None and cfg.model.weights is None
    assert cfg.data.img_size == 320 and cfg.optim.lr == 0.04  # det_nano_synthetic.yaml
    Model.new("det").fit(config="det_nano_smoke.yaml")  # a config given: no embedded recipe
    assert recorder.calls[-1].data.img_size == 640 and recorder.calls[-1].optim.lr == 0.01


def test_new_options_reach_the_config_and_names_are_checked_before_training(recorder, tiny):
    root = tiny[1]
    Model.new("det", variant="s", names=list(SHAPE_CLASSES), lr=0.02).fit(root)
    cfg = recorder.calls[-1]
    assert (cfg.model.variant, cfg.model.num_classes, cfg.optim.lr) == ("s", len(SHAPE_CLASSES), 0.02)
    calls = len(recorder.calls)
    with pytest.raises(DataError, match="declares the classes") as err:
        Model.new("det", names=["cat", "dog", "eel", "fox"]).fit(root)
    assert err.value.exit_code == 2 and len(recorder.calls) == calls  # refused before run_fit
    with pytest.raises(ConfigError, match="class names"):
        Model.new("det", num_classes=3, names=["a", "b"])


def test_the_log_gets_plain_lines(monkeypatch, tiny):
    import lucidyolo.engine.loop.fit as fit_module

    def fake_run_fit(spec, cfg, log=None, **_):
        log("[bold]lucid fit det[/bold]: [yellow]warning:[/yellow] x")
        log("path [/not/markup]")
        return {"run_dir": tiny[0].parent, "best": str(tiny[0]), "metrics": {}, "transfer": None}

    monkeypatch.setattr(fit_module, "run_fit", fake_run_fit)
    lines: list[str] = []
    Model.load(tiny[0]).fit(tiny[1], log=lines.append)
    assert lines == ["lucid fit det: warning: x", "path [/not/markup]"]
