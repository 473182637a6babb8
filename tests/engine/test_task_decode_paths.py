"""The engine takes decode paths, the inference view and evaluation options from the task.

A detection spec whose paths are renamed (``fast`` / ``full``), whose hooks accept
keywords only and which has no ``inference_view`` goes through ``lucid eval``'s
runner, the predictor and the training module's decode: nothing assumes the
built-in tasks' path names or calls a hook positionally.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest

from tests.cli.tiny_run import write_tiny_run

RENAMED = {"fast": "e2e", "full": "nms"}
CALLS: list[tuple[str, Any]] = []


def _renamed_spec():
    from lucidyolo.tasks.api import EvalOption
    from lucidyolo.tasks.detect import hooks as detect_hooks
    from lucidyolo.tasks.registry import get_task

    def decode(*, outputs: Any, path: str, cfg: Any) -> Any:  # API 2.5: the engine passes the model config
        CALLS.append(("decode", path))
        return detect_hooks.decode(outputs=outputs, path=RENAMED[path], cfg=cfg)

    def evaluate(*, options: dict[str, Any], paths: tuple[str, ...], **kwargs: Any) -> dict[str, Any]:
        CALLS.append(("evaluate", (dict(options), paths)))
        return detect_hooks.evaluate(options=options, paths=paths, **kwargs)

    def predict(**kwargs: Any) -> list[dict[str, Any]]:
        CALLS.append(("predict", None))
        return detect_hooks.predict(**kwargs)

    return dataclasses.replace(
        get_task("det"), decode=decode, evaluate=evaluate, predict=predict, decode_paths=("fast", "full"),
        inference_view=None, eval_options=(EvalOption("strict", False, "a switch the protocol reads"),),
    )


@pytest.fixture
def renamed(tmp_path, monkeypatch):
    from lucidyolo.tasks import registry

    spec = _renamed_spec()
    real = registry.get_task
    monkeypatch.setattr(registry, "get_task", lambda name: spec if real(name).name == "det" else real(name))
    CALLS.clear()
    return spec, write_tiny_run(tmp_path)[0]


def test_eval_scores_the_tasks_paths_with_its_options(renamed):
    from lucidyolo.engine.commands.evaluate import run_eval

    _, ckpt = renamed
    report = run_eval(ckpt, device="cpu", options={"strict": "yes"})
    assert list(report["paths"]) == ["fast", "full"] and report["default_path"] == "fast"
    assert report["options"] == {"strict": True}
    (evaluated,) = [value for name, value in CALLS if name == "evaluate"]
    assert evaluated == ({"strict": True, "matches": True}, ("fast", "full"))
    assert {value for name, value in CALLS if name == "decode"} == {"fast", "full"}


def test_predictor_defaults_to_the_first_path_and_refuses_others(renamed):
    from lucidyolo.engine.commands.predict import Predictor
    from lucidyolo.engine.weights.restore import restore
    from lucidyolo.errors import UserError

    _, ckpt = renamed
    restored = restore(ckpt)
    predictor = Predictor(restored, device="cpu")
    assert predictor.decoder == "fast"
    predictor(np.zeros((64, 64, 3), np.uint8), conf=0.0)
    assert ("decode", "fast") in CALLS and ("predict", None) in CALLS
    with pytest.raises(UserError, match="not a decode path of task 'det'") as info:
        Predictor(restored, decoder="e2e", device="cpu")
    assert "fast, full" in info.value.why


def test_training_module_decodes_on_the_tasks_first_path():
    import torch

    from lucidyolo.engine.loop.system import TrainingSystem
    from lucidyolo.models import create_model

    spec = _renamed_spec()
    model = create_model("n", num_classes=2).eval()
    decode = functools.partial(spec.decode, cfg=spec.config_model(variant="n", num_classes=2))  # as engine/loop/build.py binds it
    system = TrainingSystem(model, torch.nn.Identity(), decode, torch.nn.Identity(), lambda **_: None, (),
                            config={}, decode_path=spec.default_decode_path)
    CALLS.clear()
    with torch.no_grad():
        rows = system.decode_outputs(model(torch.rand(1, 3, 64, 64)))
    assert CALLS == [("decode", "fast")] and rows.shape == (1, 300, 6)


def test_the_generic_inference_view_folds_a_copy_of_the_whole_model():
    import torch

    from lucidyolo.engine.commands.evaluate import inference_view
    from lucidyolo.models import create_model

    spec = _renamed_spec()
    model = create_model("n", num_classes=2).eval()
    x = torch.rand(1, 3, 64, 64)
    view = inference_view(spec, model, ("fast",), "cpu")
    with torch.no_grad():
        out, ref = view(x), model(x)
    assert set(out) >= {"o2o", "o2m"}  # the whole model: a task without a view of its own keeps every branch
    torch.testing.assert_close(out["o2o"]["logits"], ref["o2o"]["logits"], rtol=1e-3, atol=1e-3)
    assert all(p.requires_grad for p in model.parameters())  # the original is left as it was
