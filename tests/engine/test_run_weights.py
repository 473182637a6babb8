"""``weights.pt``: a finished ``lucid fit`` leaves the slim weights of ``best.ckpt`` beside its checkpoints."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_lucid
from tests.faults import fast_fit_args, tiny_root


def test_no_best_checkpoint_no_weights(tmp_path):
    from lucidyolo.engine.run.run_weights import weights_note, write_run_weights

    assert write_run_weights(tmp_path / "checkpoints" / "best.ckpt", tmp_path) is None
    assert not (tmp_path / "weights.pt").exists() and weights_note(None) == ""
    note = weights_note({"weights": "runs/x/weights.pt", "bytes": 9_870_000})
    assert note == "; slim weights runs/x/weights.pt (9.9 MB, for eval / predict / export / --model.weights)"


@pytest.mark.slow
def test_a_finished_fit_writes_slim_weights_that_predict_loads_and_a_resume_rewrites(tmp_path):
    import torch

    root = tiny_root("det", tmp_path / "data")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "runs" / "version_0"
    weights, best = run / "weights.pt", run / "checkpoints" / "best.ckpt"
    assert weights.is_file() and best.is_file()
    assert weights.stat().st_size < best.stat().st_size / 2  # no optimizer state, one set of weights
    assert f"slim weights {weights} (" in " ".join(r.stdout.split())
    assert not list(run.glob(".weights.pt*"))  # written atomically: no temporary left
    slim = torch.load(weights, weights_only=True)
    assert slim["lucid"]["kind"] == "weights" and slim["lucid"]["stored"] == "EMA"
    ckpt = torch.load(best, weights_only=True)
    shadow = ckpt["lucid_ema"]["shadow"]
    assert all(torch.equal(slim["state_dict"][f"model.{k}"], v) for k, v in shadow.items())  # best.ckpt's EMA

    # the file loads where a checkpoint does, and predicts what best.ckpt predicts
    image = next((root / "val").glob("*.jpg"))
    found = {}
    for name, path in (("weights", weights), ("best", best)):
        out = tmp_path / f"{name}.json"
        p = run_lucid("predict", "--checkpoint", str(path), "--source", str(image), "--output", str(out),
                      "--device", "cpu", cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        found[name] = [{k: v for k, v in i.items() if k != "checkpoint"} for i in json.loads(out.read_text())["images"]]
    assert found["weights"] == found["best"]

    # a resume that finishes writes it again from its own best.ckpt
    for name in ("last.ckpt", "best.ckpt"):
        c = torch.load(run / "checkpoints" / name, weights_only=True)
        c["lucid"]["config"]["trainer"]["max_epochs"] = 2
        torch.save(c, run / "checkpoints" / name)
    before = weights.stat().st_mtime_ns
    r = run_lucid("fit", "det", "--resume", str(run), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert weights.stat().st_mtime_ns != before and "slim weights" in r.stdout
    slim = torch.load(weights, weights_only=True)
    shadow = torch.load(best, weights_only=True)["lucid_ema"]["shadow"]
    assert all(torch.equal(slim["state_dict"][f"model.{k}"], v) for k, v in shadow.items())
