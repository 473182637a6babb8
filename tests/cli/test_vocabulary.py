"""One vocabulary: every command's options, walked through the Typer app in-process (help paths are torch-free)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from lucidyolo.cli.app import app

ROOT = typer.main.get_command(app)

# other spellings of our shared options: none may appear in any command's options or help
FORBIDDEN = ("--root", "--imgsz", "--image-size", "--imgsize", "--img", "--size", "--data", "--dataset", "--data-dir",
             "--data-path", "--batch", "--bs")
READS_A_DATASET_ROOT = {"fit", "eval", "data check", "data download", "data tile dota"}
TAKES_AN_IMAGE_SIZE = {"eval", "predict", "export", "gate overfit", "data synth", "model summary"}


def _walk(command, path=()):
    subs = getattr(command, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _walk(sub, (*path, name))
    else:
        yield " ".join(path), command


COMMANDS = dict(_walk(ROOT))


def _options(command):
    """Visible options: ``{python name: [--long spellings]}``."""
    return {p.name: [o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
            for p in command.params if p.param_type_name == "option" and not p.hidden}


def test_the_walk_finds_every_command():
    assert {"fit", "eval", "predict", "export", "plugins", "data check", "data synth", "data download",
            "data tile dota", "gate overfit", "model summary"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_shared_options_have_one_spelling(name):
    opts = _options(COMMANDS[name])
    spelled = {o for names in opts.values() for o in names}
    assert not spelled & set(FORBIDDEN), f"lucid {name}: {sorted(spelled & set(FORBIDDEN))}"
    for param, names in opts.items():
        if "root" in param:  # a dataset root, read or written
            assert names == ["--data-root"], (name, param, names)
        if param in ("img_size", "imgsz", "image_size", "size"):
            assert names == ["--img-size"], (name, param, names)
        if param in ("batch", "batch_size"):
            assert names == ["--batch-size"], (name, param, names)
    assert ("--data-root" in spelled) == (name in READS_A_DATASET_ROOT), name
    assert ("--img-size" in spelled) == (name in TAKES_AN_IMAGE_SIZE), name


def test_every_help_page_shows_the_shared_names_and_none_of_the_others():
    runner = CliRunner()
    forbidden = re.compile("|".join(rf"(?<![\w-]){re.escape(w)}(?![\w.-])" for w in FORBIDDEN))
    pages = {"": runner.invoke(app, ["--help"], env={"COLUMNS": "250"})}
    groups = {" ".join(p.split()[:i]) for p in COMMANDS for i in range(1, len(p.split()))}
    for name in sorted(set(COMMANDS) | groups):
        pages[name] = runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "250"})
    for name, result in pages.items():
        assert result.exit_code == 0, (name, result.output)
        found = forbidden.findall(result.output)
        assert not found, f"`lucid {name} --help` shows {found}"
    for name in READS_A_DATASET_ROOT:
        assert "--data-root" in pages[name].output, name
    for name in TAKES_AN_IMAGE_SIZE:
        assert "--img-size" in pages[name].output, name
    assert "the run's training size" in pages["eval"].output  # eval's default is the checkpoint's size
