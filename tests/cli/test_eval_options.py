"""Task evaluation options: `lucid eval --option NAME=VALUE`, checked against the checkpoint's task.

The segmentation task declares ``masks`` (default true); detection declares none. The
old ``--masks true|false`` / ``--no-masks`` flags still work, hidden, as deprecated
spellings of ``--option masks=...`` (ignored by a task without that option, as before).
"""

from __future__ import annotations

import json
import warnings

import pytest

from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def seg_ckpt(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("tinyseg"), "seg")[0]


@pytest.fixture(scope="module")
def det_ckpt(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("tinydet"))[0]


def _report(result, path):
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(path.read_text())


def test_option_masks_false_scores_boxes_only_and_the_report_says_so(seg_ckpt, tmp_path, lucid):
    out = tmp_path / "report.json"
    report = _report(lucid("eval", "--checkpoint", str(seg_ckpt), "--device", "cpu", "--option", "masks=false",
                           "--output", str(out)), out)
    assert {path: set(types) for path, types in report["paths"].items()} == {"e2e": {"bbox"}, "nms": {"bbox"}}
    assert report["options"] == {"masks": False} and report["default_path"] == "e2e"


def test_the_deprecated_flags_still_work_and_name_their_replacement(seg_ckpt, tmp_path, lucid):
    for flags, value in ((("--no-masks",), "false"), (("--masks", "no"), "no")):
        out = tmp_path / f"{flags[0]}.json"
        r = lucid("eval", "--checkpoint", str(seg_ckpt), "--device", "cpu", *flags, "--output", str(out))
        report = _report(r, out)
        assert set(report["paths"]["e2e"]) == {"bbox"}, flags
        assert "deprecated" in r.stderr and f"--option masks={value}" in r.stderr, r.stderr


def test_a_task_without_the_option_ignores_the_deprecated_flag_as_before(det_ckpt, tmp_path, lucid):
    out = tmp_path / "report.json"
    r = lucid("eval", "--checkpoint", str(det_ckpt), "--device", "cpu", "--no-masks", "--output", str(out))
    assert _report(r, out)["options"] == {} and "deprecated" in r.stderr


@pytest.mark.parametrize(("task", "option", "what"), [
    ("seg", "mask=false", "Evaluation option 'mask' is not declared by task 'seg'"),
    ("seg", "masks=maybe", "Evaluation option masks=maybe is not valid: 'maybe' is not true or false"),
    ("det", "masks=false", "Evaluation option 'masks' is not declared by task 'det'"),
])
def test_an_unknown_option_or_a_bad_value_exits_2_listing_the_tasks_options(
    task, option, what, seg_ckpt, det_ckpt, lucid,
):
    ckpt = seg_ckpt if task == "seg" else det_ckpt
    r = lucid("eval", "--checkpoint", str(ckpt), "--device", "cpu", "--option", option)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert what in r.stderr and "why:" in r.stderr and "fix:" in r.stderr
    listing = "masks=true|false (default true)" if task == "seg" else "Task 'det' has no evaluation options"
    assert listing in r.stderr


@pytest.mark.parametrize("items", [("masks",), ("=false",), ("masks=true", "masks=false")])
def test_a_malformed_or_repeated_option_exits_2_before_the_checkpoint_loads(items, tmp_path, lucid):
    args = [a for item in items for a in ("--option", item)]
    r = lucid("eval", "--checkpoint", str(tmp_path / "missing.ckpt"), *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert ("is not NAME=VALUE" in r.stderr) or ("is given twice" in r.stderr)


def test_python_api_takes_options_and_the_old_masks_keyword_warns(seg_ckpt):
    from lucidyolo import Model
    from lucidyolo.errors import UserError

    model = Model.load(seg_ckpt)
    report = model.evaluate(device="cpu", options={"masks": False})
    assert set(report.paths["e2e"]) == {"bbox"} and report.default_path == "e2e"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = model.evaluate(device="cpu", masks=False)
    assert set(old.paths["e2e"]) == {"bbox"}
    assert any(issubclass(w.category, DeprecationWarning) and "options=" in str(w.message) for w in caught)
    with pytest.raises(UserError, match="'masks' is a bool option|is not true or false"):
        model.evaluate(device="cpu", options={"masks": 3})


def test_eval_option_values_parse_to_the_defaults_type():
    from lucidyolo.tasks.api import EvalOption

    assert EvalOption("a", True).parse("No") is False and EvalOption("a", False).parse(True) is True
    assert EvalOption("n", 3).parse(" 7 ") == 7 and EvalOption("x", 0.5).parse("2") == 2.0
    assert EvalOption("s", "coco").parse("voc") == "voc"
    for option, bad in ((EvalOption("a", True), 1), (EvalOption("n", 3), "7.5"), (EvalOption("n", 3), True),
                        (EvalOption("x", 0.5), "half"), (EvalOption("s", "coco"), 3)):
        with pytest.raises(ValueError):
            option.parse(bad)
    assert EvalOption("masks", True, "also masks").describe() == "masks=true|false (default true): also masks"
