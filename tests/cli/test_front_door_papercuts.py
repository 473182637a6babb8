"""Issue 44's papercuts at the front door, through the real `lucid` console script (torch-free unless noted)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import run_lucid

ROOT = Path(__file__).resolve().parents[2]


def _said(r) -> str:
    return " ".join((r.stdout + r.stderr).split())


# ------------------------------------------------------------------ help pages


@pytest.mark.parametrize("args", [(), ("data", "check"), ("predict",), ("data",)])
def test_help_shows_no_bool_value_after_a_flag(args):
    r = run_lucid(*args, "--help")
    assert r.returncode == 0, r.stderr
    assert "<bool>" not in r.stdout, r.stdout
    assert "--help" in r.stdout


def test_data_check_names_what_each_split_option_is():
    r = run_lucid("data", "check", "--help")
    for option in ("--train-images", "--train-ann-file", "--val-images", "--val-ann-file"):
        row = next(ln for ln in r.stdout.splitlines() if f" {option} " in ln)
        assert "COCO JSON" in row or "image folder" in row, row


def test_a_help_paragraph_is_wrapped_at_the_terminal_not_at_the_docstring():
    # the docstring breaks after "cut;": a wide terminal shows the paragraph's words on one line
    r = run_lucid("predict", "--help", env={"COLUMNS": "200"})
    assert "grepped and cut; a video frame is named" in r.stdout, r.stdout


def test_dotted_true_false_overrides_still_parse():
    r = run_lucid("fit", "det", "--data.skip_bad_images", "true", "--print-config")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\s+skip_bad_images: true$", r.stdout, flags=re.M), r.stdout


# ------------------------------------------------------------------ other trainers' commands and words


@pytest.mark.parametrize(("args", "ours", "example"), [
    (("train", "data=coco8.yaml"), "lucid fit", "lucid fit det --data-root DIR"),
    (("val",), "lucid eval", "lucid eval --checkpoint RUN_DIR --data-root DIR"),
    (("detect", "train"), "lucid fit det", "lucid fit det --data-root DIR"),
    (("segment", "predict"), "lucid predict", "lucid predict --checkpoint RUN_DIR --source IMAGE"),
    (("pose",), "lucid fit keypoints", "lucid fit keypoints --data-root DIR"),
])
def test_another_trainers_command_names_ours(args, ours, example):
    r = run_lucid(*args)
    said = _said(r)
    assert r.returncode == 2, said
    assert f"No such command {args[0]!r}; did you mean `{ours}`?" in said, said
    assert f"fix: Write `{example}`" in said and "why:" in said and "Traceback" not in said


def test_a_typo_of_a_command_keeps_the_close_match():
    r = run_lucid("fti")
    assert r.returncode == 2 and "Did you mean 'fit'?" in r.stderr, r.stderr


@pytest.mark.parametrize(("args", "ours", "example"), [
    (("predict", "model=best.ckpt"), "--checkpoint", "`--checkpoint best.ckpt`"),
    (("eval", "model=runs/det/version_0"), "--checkpoint", "`--checkpoint runs/det/version_0`"),
    (("fit", "det", "model=yolo26n.pt"), "model.weights", "`model.weights=yolo26n.pt`"),
    (("fit", "det", "model=runs/det/version_0/checkpoints/best.ckpt"), "model.weights",
     "`model.weights=runs/det/version_0/checkpoints/best.ckpt`"),
    (("fit", "det", "model=yolo26s.yaml"), "model.variant", "`model.variant=s`"),
    (("fit", "det", "model=m"), "model.variant", "`model.variant=m`"),
])
def test_model_equals_is_answered_by_what_its_value_is(args, ours, example):
    r = run_lucid(*args)
    said = _said(r)
    assert r.returncode == 2, said
    assert f"did you mean `{ours}`?" in said and f"fix: Write {example}" in said, said


def test_a_published_file_name_says_its_task_and_variant():
    said = _said(run_lucid("fit", "det", "model=yolo26s-seg.pt"))
    assert "yolo26s-seg.pt is the seg model of variant 's' (`lucid fit seg`)" in said, said


# ------------------------------------------------------------------ order of checks and messages


def test_predict_names_a_missing_checkpoint_before_the_source(tmp_path):
    r = run_lucid("predict", "--checkpoint", str(tmp_path / "missing.pt"), "--source", str(tmp_path / "x.jpg"))
    assert r.returncode == 2, r.stderr
    assert "Checkpoint not found" in r.stderr and "matches no image" not in r.stderr, r.stderr


def test_data_check_says_what_auto_num_classes_resolves_to(tmp_path):
    root = tmp_path / "set"
    assert run_lucid("data", "synth", "--out", str(root), "--images", "8", "--format", "yolo").returncode == 0
    r = run_lucid("data", "check", "--data-root", str(root))
    said = _said(r)
    assert r.returncode == 0, said
    assert "model.num_classes: auto (the default) will read 4 classes from this dataset" in said, said
    assert "Set model.num_classes" not in said


# ------------------------------------------------------------------ the variant of a published file


def _stop_after_the_weights(monkeypatch, source):
    """run_fit up to the dataset: the weights read as ``source``; the config it goes on with is returned."""
    import lucidyolo.engine.loop.build as build
    import lucidyolo.engine.loop.fit as fit

    class Reached(Exception):
        pass

    seen = {}

    def data_root_of(spec, cfg):
        seen["cfg"] = cfg
        raise Reached

    monkeypatch.setattr(fit, "read_start_weights", lambda cfg, log, progress=None: (source, source.path.name))
    monkeypatch.setattr(build, "data_root_of", data_root_of)

    def run(overrides):
        from lucidyolo.config.resolve import resolve_config
        from lucidyolo.tasks.registry import get_task

        spec = get_task("det")
        cfg = resolve_config(spec, [], {"model": overrides}, ROOT / "no-such-set")
        with pytest.raises(Reached):
            fit.run_fit(spec, cfg)
        return seen["cfg"]

    return run


def _source(variant: str, source_format: str):
    from lucidyolo.engine.weights.transfer import SourceWeights

    return SourceWeights(path=Path(f"yolo26{variant}.pt"), task="det", variant=variant, class_names=["a"],
                         dataset_meta={}, state={}, used_ema=True, source_format=source_format)


def test_a_published_file_gives_its_variant_when_none_is_asked_for(monkeypatch):
    from lucidyolo.errors import ConfigError

    run = _stop_after_the_weights(monkeypatch, _source("s", "published YOLO26"))
    assert run({"weights": "yolo26s.pt"}).model.variant == "s"
    assert run({"weights": "yolo26s.pt", "variant": "s"}).model.variant == "s"
    with pytest.raises(ConfigError, match=r"holds a 's' model; this run builds 'n'"):  # asked for: it must agree
        run({"weights": "yolo26s.pt", "variant": "n"})


def test_a_lucid_checkpoint_of_another_variant_is_still_refused(monkeypatch):
    from lucidyolo.errors import ConfigError

    run = _stop_after_the_weights(monkeypatch, _source("s", "lucid"))
    with pytest.raises(ConfigError, match=r"holds a 's' model; this run builds 'n'"):
        run({"weights": "s.ckpt"})


# ------------------------------------------------------------------ the README's set-up


def test_readme_python_version_is_pyprojects():
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    readme = (ROOT / "README.md").read_text()
    assert wanted.startswith(">=")
    assert f"Python {wanted.removeprefix('>=')}+" in readme
    others = {m for m in re.findall(r"Python (3\.\d+)\+", readme)} - {wanted.removeprefix(">=")}
    assert not others, others


def test_readme_has_a_users_install_apart_from_the_developers():
    readme = (ROOT / "README.md").read_text()
    assert 'pip install -c constraints.txt -e ".[video,onnx]"' in readme  # the user's line, extras named
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme  # the CPU-only route
