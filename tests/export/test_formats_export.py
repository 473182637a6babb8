"""`lucid export --format torchscript|openvino --check` for every built-in task, and the format errors.

Tiny seeded untrained checkpoints at 64 px (their scores are not tied: each check compares rows);
every task's own check runs on the exported file through the format's runtime.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
import torch

from tests.conftest import run_lucid

TASKS = ("det", "seg", "obb", "keypoints")
IMG_SIZE = 64
OPENVINO_EXTRA = 'pip install -c constraints.txt -e ".[openvino]"'


def write_tiny_checkpoint(base: Path, task: str) -> Path:
    """A format-2 checkpoint of the task's seeded untrained nano at 64 px; keypoints at its reference meta (17 points)."""
    from lucidyolo.data.synth import SHAPE_CLASSES
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    meta = dict(spec.reference_meta or {})
    torch.manual_seed(0)
    cfg = spec.config_model.model_validate({"task": spec.name})
    model = spec.build_model(cfg=cfg, num_classes=len(SHAPE_CLASSES), meta=meta)
    config = spec.run_config.model_validate({"model": {"task": spec.name}}).model_dump(mode="json")
    config["data"].update(img_size=IMG_SIZE, data_root=str(base / "data"))
    config["num_classes_resolved"] = len(SHAPE_CLASSES)
    base.mkdir(parents=True, exist_ok=True)
    ckpt = base / f"{task}.ckpt"
    torch.save({
        "lucid": {"config": config, "class_names": list(SHAPE_CLASSES), "dataset_meta": meta, "format": 2},
        "state_dict": {f"model.{k}": v for k, v in model.eval().state_dict().items()},
    }, ckpt)
    return ckpt


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("formats")
    return {task: write_tiny_checkpoint(base / task, task) for task in TASKS}


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
@pytest.mark.parametrize("task", TASKS)
def test_torchscript_export_passes_the_tasks_check(checkpoints, task, tmp_path):
    from lucidyolo.engine.weights.export import run_export
    from lucidyolo.export.torchscript import META_FILE

    out = tmp_path / ("model.torchscript" if task != "obb" else "model.pt")
    result = run_export(checkpoints[task], "torchscript", check=True, output=out)  # any name: found by content
    assert result["path"] == str(out) and result["dynamic_batch"] is True
    assert result["parity"]["passed"], result["parity"]["summary"]
    assert result["parity"]["rows"] > 0  # rows were compared, not only the score profile
    files: dict[str, str] = {META_FILE: ""}
    module = torch.jit.load(str(out), _extra_files=files)
    meta = json.loads(files[META_FILE])
    assert meta["outputs"] == result["outputs"] and meta["img_size"] == [IMG_SIZE, IMG_SIZE]
    got = module(torch.rand(3, 3, IMG_SIZE, IMG_SIZE))  # any batch: the trace keeps it free
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(result["outputs"]) and all(t.shape[0] == 3 for t in got)
    assert not list(tmp_path.glob(".*.tmp"))  # written through atomic_open: no temporary left


@pytest.mark.parametrize("task", TASKS)
def test_openvino_export_passes_the_tasks_check(checkpoints, task, tmp_path):
    ov = pytest.importorskip("openvino", reason=f"the openvino extra is not installed ({OPENVINO_EXTRA})")
    from lucidyolo.engine.weights.export import run_export

    out = tmp_path / "model.xml"
    result = run_export(checkpoints[task], "openvino", check=True, output=out, dynamic_batch=task == "seg")
    assert result["path"] == str(out) and result["bin"] == str(tmp_path / "model.bin")
    assert result["parity"]["passed"], result["parity"]["summary"]
    assert result["parity"]["rows"] > 0
    model = ov.Core().read_model(str(out))
    assert [o.get_any_name() for o in model.outputs] == result["outputs"]
    assert [i.get_any_name() for i in model.inputs] == ["images"]
    assert model.inputs[0].get_partial_shape().is_dynamic is (task == "seg")
    assert result["bytes"] == out.stat().st_size + (tmp_path / "model.bin").stat().st_size
    assert (tmp_path / "model.bin").stat().st_size > 4 * 2_000_000  # float32 weights, not fp16-compressed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "model.xml"]


def test_cli_torchscript_and_openvino_with_check(checkpoints, tmp_path):
    ts = tmp_path / "det.torchscript"
    r = run_lucid("export", "--checkpoint", str(checkpoints["det"]), "--format", "torchscript", "--check",
                  "--output", str(ts))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    text = " ".join(r.stdout.split())
    assert "TorchScript (torch.jit.load) parity:" in text and "rows matched" in text
    assert zipfile.is_zipfile(ts)
    pytest.importorskip("openvino", reason=f"the openvino extra is not installed ({OPENVINO_EXTRA})")
    r = run_lucid("export", "--checkpoint", str(checkpoints["keypoints"]), "--format", "openvino", "--check",
                  "--output", str(tmp_path / "kpt.xml"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    text = " ".join(r.stdout.split())
    assert "kpt.xml + kpt.bin" in text and "OpenVINO (CPU, float32) parity:" in text and "points compared" in text


def test_python_api_accepts_the_new_formats(checkpoints, tmp_path):
    from lucidyolo.api.model import Model

    model = Model.load(checkpoints["obb"])
    exported = model.export("torchscript", output=tmp_path / "obb.torchscript", check=True)
    assert exported.path == tmp_path / "obb.torchscript" and exported.path.is_file()
    assert exported.details["parity"]["passed"]


def test_unknown_and_planned_formats_list_supported_and_planned(checkpoints):
    for fmt, first in (("foo", "--format 'foo' is not supported."), ("tensorrt", "--format 'tensorrt' is not supported yet: it is planned")):
        r = run_lucid("export", "--checkpoint", str(checkpoints["det"]), "--format", fmt)
        assert r.returncode == 2, r.stderr[-2000:]
        text = " ".join(r.stderr.split())
        assert first in text
        assert "supported: onnx, torchscript, openvino, weights" in text and "tensorrt, coreml, tflite" in text


@pytest.mark.parametrize("fmt", ["onnx", "torchscript", "openvino"])
def test_half_is_refused_where_the_format_is_float32(checkpoints, fmt, tmp_path):
    r = run_lucid("export", "--checkpoint", str(checkpoints["det"]), "--format", fmt, "--half",
                  "--output", str(tmp_path / "x"))
    assert r.returncode == 2, r.stderr[-2000:]
    text = " ".join(r.stderr.split())
    assert f"--half does not apply to --format {fmt}" in text and "--half applies to: weights" in text
    assert list(tmp_path.iterdir()) == []


def test_openvino_missing_exits_2_naming_the_extra(checkpoints, tmp_path):
    hide = tmp_path / "hide"  # an `openvino` package that fails to import, first on the path
    (hide / "openvino").mkdir(parents=True)
    (hide / "openvino" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(hide), os.environ.get("PYTHONPATH")]))}
    r = run_lucid("export", "--checkpoint", str(checkpoints["det"]), "--format", "openvino", "--output",
                  str(tmp_path / "m.xml"), env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert OPENVINO_EXTRA in " ".join(r.stderr.split())
    assert not (tmp_path / "m.xml").exists()


def test_openvino_output_must_end_in_xml(checkpoints, tmp_path):
    pytest.importorskip("openvino", reason=f"the openvino extra is not installed ({OPENVINO_EXTRA})")
    from lucidyolo.engine.weights.export import run_export
    from lucidyolo.errors import ConfigError

    with pytest.raises(ConfigError, match="does not end in .xml"):
        run_export(checkpoints["det"], "openvino", output=tmp_path / "m.onnx")


def test_openvino_overwrite_removes_the_old_graph_first(checkpoints, tmp_path, monkeypatch):
    """A write stopped after the old .xml is gone leaves no .xml beside a new .bin: absent, not mixed."""
    pytest.importorskip("openvino", reason=f"the openvino extra is not installed ({OPENVINO_EXTRA})")
    import lucidyolo.export.openvino_ir as ir
    from lucidyolo.engine.weights.export import run_export

    out = tmp_path / "m.xml"
    run_export(checkpoints["det"], "openvino", output=out)
    real = ir.atomic_open
    calls: list[Path] = []

    def stop_before_the_graph(path, mode="wb", **kw):
        calls.append(Path(path))
        if Path(path).suffix == ".xml":
            raise KeyboardInterrupt
        return real(path, mode, **kw)

    monkeypatch.setattr(ir, "atomic_open", stop_before_the_graph)
    with pytest.raises(KeyboardInterrupt):
        run_export(checkpoints["det"], "openvino", output=out)
    assert [p.suffix for p in calls] == [".bin", ".xml"]
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
