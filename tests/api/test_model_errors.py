"""The API's mistakes are the CLI's: ``UserError`` subclasses (exit code 2 in ``lucid``) with what / why / fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lucidyolo import Model
from lucidyolo.errors import ConfigError, NotAvailableError, PluginError, UserError
from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> Model:
    return Model.load(write_tiny_run(tmp_path_factory.mktemp("errors"))[0])


def test_a_missing_checkpoint_is_the_error_lucid_eval_exits_2_on(tmp_path, lucid):
    missing = tmp_path / "nope.ckpt"
    with pytest.raises(UserError, match="Checkpoint not found") as err:
        Model.load(missing)
    assert type(err.value) is UserError and err.value.exit_code == 2 and err.value.fix
    r = lucid("eval", "--checkpoint", str(missing))
    assert r.returncode == 2 and "Checkpoint not found" in r.stderr and "Traceback" not in r.stderr


def test_a_folder_without_a_checkpoint_names_model_load(tmp_path):
    with pytest.raises(UserError, match="Model.load names the folder .* which holds no checkpoint"):
        Model.load(tmp_path)


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path):
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError):
        Model.load(junk)


def test_an_unknown_task_is_a_plugin_error_with_a_suggestion():
    with pytest.raises(PluginError, match="Unknown task 'detct'. Did you mean 'detect'?") as err:
        Model.new("detct")
    assert err.value.exit_code == 2 and "known tasks" in (err.value.why or "")


def test_an_unknown_model_option_is_refused_by_new():
    with pytest.raises(ConfigError, match="`model.variantt` is not a known key; did you mean `model.variant`"):
        Model.new("det", variantt="s")
    with pytest.raises(ConfigError, match="`model.variant`"):
        Model.new("det", variant="xxl")


def test_a_bad_override_key_is_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = Model.new("det")
    with pytest.raises(ConfigError, match="`trainer.max_epoch` is not a known key; did you mean `trainer.max_epochs`"):
        model.fit(trainer__max_epoch=2)
    with pytest.raises(ConfigError, match="`epochs` is not a known key"):
        model.fit(epochs=2)
    with pytest.raises(ConfigError, match="multiple of 32"):
        model.fit(tmp_path / "missing", data={"img_size": 100})
    assert list(tmp_path.iterdir()) == []  # no run folder, no synthetic set: nothing ran
    assert not model.trained


def test_an_untrained_model_cannot_predict_evaluate_or_export():
    model = Model.new("det")
    for call in (lambda: model.predict(np.zeros((8, 8, 3), np.uint8)), model.evaluate, model.export):
        with pytest.raises(UserError, match="needs a trained model") as err:
            call()
        assert err.value.fix and "fit" in err.value.fix


@pytest.mark.parametrize(("source", "match"), [
    (np.zeros((3, 32, 32), np.uint8), r"shape \(3, 32, 32\), not \(H, W, 3\)"),
    (np.zeros((32, 32, 4), np.uint8), r"shape \(32, 32, 4\)"),
    (np.zeros((32, 32, 3), np.float32), "dtype float32, not uint8"),
    (12, "cannot read a source of type int"),
    ([], "empty list"),
    ("/nonexistent/*.jpg", "matches no image"),
])
def test_bad_sources_are_user_errors(loaded, source, match):
    with pytest.raises(UserError, match=match):
        loaded.predict(source, device="cpu")


def test_bad_predict_arguments_are_named_as_python_arguments(loaded):
    image = np.zeros((32, 32, 3), np.uint8)
    with pytest.raises(UserError, match=r"^conf=1.5 is outside \[0, 1\]. Fix: Use e.g. conf=0.25.$"):
        loaded.predict(image, conf=1.5)
    with pytest.raises(UserError, match=r"^decoder='fast' is not a decode path of task 'det'.*Fix: Use "
                       r"decoder='e2e' or decoder='nms'"):
        loaded.predict(image, decoder="fast")
    with pytest.raises(UserError, match=r"^img_size=100 is not a multiple of 32. Fix: Use e.g. img_size=640.$"):
        loaded.predict(image, img_size=100, device="cpu")
    with pytest.raises(UserError, match=r"^device='tpu:x' is not a device name"):
        loaded.predict(image, device="tpu:x")
    with pytest.raises(UserError, match="--format 'tflite' is not supported"):
        loaded.export("tflite")


def test_a_task_without_hooks_says_which_are_missing(monkeypatch):
    import dataclasses

    import lucidyolo.tasks.registry as registry

    spec = dataclasses.replace(registry.get_task("det"), build_criterion=None)
    monkeypatch.setattr(registry, "get_task", lambda name: spec)
    with pytest.raises(NotAvailableError, match="does not provide build_criterion"):
        Model.new("det").fit(trainer__max_epochs=1)


def test_importing_lucidyolo_and_the_api_stays_torch_free():
    code = ("import sys, lucidyolo\nfrom lucidyolo import Model, Prediction, FitResult, EvalReport, ExportResult\n"
            "import lucidyolo.api\nassert 'Model' in dir(lucidyolo) and Model is lucidyolo.api.Model\n"
            "try:\n    lucidyolo.nothing\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit('no error')\n"
            "print(','.join(m for m in sys.modules if m.split('.')[0] in ('torch', 'pytorch_lightning', 'lightning')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_the_engine_never_imports_the_api():
    from tests.test_import_layers import PACKAGE_DIR, import_graph, reachable

    graph = import_graph(PACKAGE_DIR)
    for module in (m for m in graph if m.startswith(("lucidyolo.engine", "lucidyolo.tasks", "lucidyolo.config"))):
        assert not {t for t in reachable(graph, module) if t.startswith("lucidyolo.api")}, module
