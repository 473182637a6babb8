"""Words from other YOLO trainers and typos of our options: exit 2 with a did-you-mean naming our spelling."""

from __future__ import annotations

import pytest
import typer

from lucidyolo.cli.app import app
from lucidyolo.config.habits import HABITS, suggest
from lucidyolo.config.overrides import parse_overrides, top_level_keys
from lucidyolo.config.schema import RunConfig
from lucidyolo.errors import ConfigError

# (arguments after `lucid`, our spelling the answer must name, the example it must give)
CASES = [
    (("fit", "det", "epochs=2"), "trainer.max_epochs", "`trainer.max_epochs=2`"),
    (("fit", "det", "--epochs", "2"), "trainer.max_epochs", "`trainer.max_epochs=2`"),
    (("fit", "det", "imgsz=320"), "data.img_size", "`data.img_size=320`"),
    (("fit", "det", "--imgsz", "320"), "data.img_size", "`data.img_size=320`"),
    (("fit", "det", "batch=16"), "data.batch_size", "`data.batch_size=16`"),
    (("fit", "det", "--batch", "16"), "data.batch_size", "`data.batch_size=16`"),
    (("fit", "det", "data=coco8.yaml"), "--data-root", "`--data-root coco8.yaml`"),
    (("fit", "det", "--data-roo", "/data/coco"), "--data-root", "`--data-root /data/coco`"),
    (("fit", "det", "--confg", "mine.yaml"), "--config", "`--config mine.yaml`"),
    (("fit", "det", "--resme", "runs/det/version_0"), "--resume", "`--resume runs/det/version_0`"),
    (("eval", "--checkpoint", "x.ckpt", "--imgsz", "320"), "--img-size", "`--img-size 320`"),
    (("predict", "--checkpoint", "x.ckpt", "--source", "a.jpg", "imgsz=320"), "--img-size", "`--img-size 320`"),
    (("data", "tile", "dota", "--data-roo", "d", "--out", "t"), "--data-root", "`--data-root d`"),
]


@pytest.mark.parametrize(("args", "ours", "example"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_the_console_script_answers_with_our_spelling(lucid, args, ours, example):
    r = lucid(*args)  # torch-free: refused while parsing, ~0.2 s each
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stderr
    assert f"did you mean `{ours}`?" in err and "why:" in err and f"fix: Write {example}" in err, err
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_a_word_with_no_close_spelling_keeps_the_general_message(lucid):
    r = lucid("fit", "det", "--frobnicate", "3")
    assert r.returncode == 2 and "Unexpected argument '--frobnicate'" in r.stderr and "did you mean" not in r.stderr


def _leaf_keys(cls, prefix=""):
    from pydantic import BaseModel

    for name, field in cls.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _leaf_keys(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def test_every_habit_names_a_real_key_or_option_with_a_reason():
    from lucidyolo.tasks.registry import get_task, task_names

    # A habit may name a key that only some tasks have (the dual head's `model.box_gain`).
    keys = set(_leaf_keys(RunConfig)).union(*(_leaf_keys(get_task(n).run_config) for n in task_names()))
    options = set()

    def walk(cmd):
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)
        options.update(o for p in cmd.params for o in getattr(p, "opts", ()) if o.startswith("--"))

    walk(typer.main.get_command(app))
    for word, habit in HABITS.items():
        assert habit.key is None or habit.key in keys, (word, habit.key)
        assert habit.option is None or habit.option in options, (word, habit.option)
        assert habit.key or habit.option, word
        assert len(habit.why) > 30, word
        assert word not in top_level_keys(), word  # a habit never shadows a key of ours


@pytest.mark.parametrize(("tokens", "ours"), [
    (["lr0=0.02"], "optim.lr"),
    (["--workers", "4"], "data.num_workers"),
    (["fliplr=0.0"], "augment.flip_lr"),
    (["batch_size=8"], "data.batch_size"),  # one of our keys without its section
    (["--print-confg"], "--print-config"),
])
def test_overrides_name_our_key(tokens, ours):
    with pytest.raises(ConfigError) as info:
        parse_overrides(tokens, ["--config", "--data-root", "--print-config", "--resume"])
    assert f"did you mean `{ours}`?" in info.value.what


def test_a_command_option_wins_over_the_dotted_key():
    assert suggest("--imgsz", ["--img-size"]).spelling == "--img-size"  # eval, predict, export
    assert suggest("--imgsz", []).spelling == "data.img_size"  # fit: the key
    assert suggest("imgsz", [], config_keys=False) is None  # no option, no overrides: nothing to name
    assert parse_overrides(["--seed", "3", "data.img_size=320"]) == {"seed": 3, "data": {"img_size": 320}}


def test_a_misspelt_top_level_key_is_not_told_to_add_a_section():
    # `seed` lives at the top level: "written with its section" would send the user looking for one
    top = suggest("--sed", [])
    assert top is not None and top.spelling == "seed" and top.why is None
    nested = suggest("--batch_sise", [])
    assert nested is not None and nested.spelling == "data.batch_size" and "section" in nested.why
