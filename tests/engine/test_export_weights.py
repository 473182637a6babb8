"""`lucid export --format weights`: a slim file that restore, eval, predict and --model.weights read."""

from __future__ import annotations

import torch

from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.weights.export import export_weights
from lucidyolo.engine.weights.restore import restore
from lucidyolo.engine.weights.transfer import read_weights
from lucidyolo.models import create_model
from tests.conftest import run_lucid


def _checkpoint(path, num_classes: int = 3):
    """A checkpoint with fit's layout: raw weights, an EMA that differs from them, optimizer state."""
    torch.manual_seed(0)
    model = create_model("n", num_classes=num_classes)
    raw = {f"model.{k}": v.clone() for k, v in model.state_dict().items()}
    shadow = {k: v + 1 if v.is_floating_point() else v.clone() for k, v in model.state_dict().items()}
    config = {**RunConfig(model={"task": "det"}).model_dump(mode="json"), "num_classes_resolved": num_classes}
    torch.save({
        "lucid": {"config": config, "class_names": ["a", "b", "c"], "dataset_meta": {}, "format": 2},
        "state_dict": raw, "lucid_ema": {"decay": 0.9999, "tau": 5.0, "updates": 3, "shadow": shadow},
        "optimizer_states": [{"state": {i: {"momentum_buffer": v.clone()} for i, v in enumerate(raw.values())}}],
    }, path)
    return raw, shadow


def test_the_weights_file_is_smaller_and_restores_the_same_model(tmp_path):
    raw, shadow = _checkpoint(tmp_path / "run.ckpt")
    result = export_weights(tmp_path / "run.ckpt", tmp_path / "w.pt")
    assert result["stored"] == "EMA" and result["bytes"] < result["checkpoint_bytes"] / 2
    from_ckpt, from_file = restore(tmp_path / "run.ckpt"), restore(tmp_path / "w.pt")
    for k, v in from_ckpt.model.state_dict().items():
        assert torch.equal(v, from_file.model.state_dict()[k]), k
    assert torch.equal(from_file.model.state_dict()["backbone.stem.0.conv.weight"],
                       shadow["backbone.stem.0.conv.weight"])
    source = read_weights(tmp_path / "w.pt")
    assert source.task == "det" and source.variant == "n" and source.class_names == ["a", "b", "c"]


def test_half_weights_load_back_as_float32_within_float16_rounding(tmp_path):
    _, shadow = _checkpoint(tmp_path / "run.ckpt")
    half = export_weights(tmp_path / "run.ckpt", tmp_path / "h.pt", half=True)
    full = export_weights(tmp_path / "run.ckpt", tmp_path / "f.pt")
    assert half["bytes"] < 0.6 * full["bytes"]
    model = restore(tmp_path / "h.pt").model
    w = model.state_dict()["backbone.stem.0.conv.weight"]
    assert w.dtype == torch.float32
    torch.testing.assert_close(w, shadow["backbone.stem.0.conv.weight"], rtol=1e-3, atol=1e-3)


def test_keep_raw_stores_both_and_the_cli_says_what_it_wrote(tmp_path):
    raw, _ = _checkpoint(tmp_path / "run.ckpt")
    r = run_lucid("export", "--checkpoint", str(tmp_path / "run.ckpt"), "--format", "weights", "--keep-raw",
                  "--output", str(tmp_path / "both.pt"))
    assert r.returncode == 0, r.stderr
    assert "raw + EMA weights" in r.stdout and "det n" in r.stdout
    saved = torch.load(tmp_path / "both.pt", weights_only=True)
    assert "optimizer_states" not in saved and saved["lucid"]["kind"] == "weights"
    assert torch.equal(saved["state_dict"]["model.backbone.stem.0.conv.weight"], raw["model.backbone.stem.0.conv.weight"])
    assert not restore(tmp_path / "both.pt", ema=False).used_ema
