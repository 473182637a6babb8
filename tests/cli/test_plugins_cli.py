"""Plugin discovery through real entry points and the real console script."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tests.cli.plugin_fixtures import (
    BROKEN,
    OLD_API,
    SINGLE_DEVICE,
    STEALS_ALIAS,
    env_with,
    write_distribution,
)


@pytest.fixture
def plugin_root(tmp_path):
    write_distribution(tmp_path, "lucid-solo", "lucid_solo", "solo", SINGLE_DEVICE)
    write_distribution(tmp_path, "lucid-broken", "lucid_broken", "broken", BROKEN)
    return tmp_path


def _tasks(result) -> dict[str, dict]:
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["tasks"]
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)), f"a task is listed twice: {names}"
    return {r["name"]: r for r in rows}


def test_plugins_json_lists_each_builtin_task_once_with_versions(lucid):
    tasks = _tasks(lucid("plugins", "--json"))
    for name in ("det", "seg", "obb", "keypoints"):
        assert tasks[name]["status"] == "ok"
        assert tasks[name]["api_version"] == "3.0"
        assert tasks[name]["version"]
        assert tasks[name]["builtin"] is True
    assert tasks["obb"]["multi_device"] is False and tasks["det"]["multi_device"] is True


def test_single_device_plugin_refuses_two_devices(lucid, plugin_root):
    env = env_with(plugin_root)
    ok = lucid("fit", "solo", "--print-config", "--model.solo_gain", "2", env=env)
    assert ok.returncode == 0, ok.stderr
    assert "solo_gain: 2" in ok.stdout and "devices: 1" in ok.stdout  # 'auto' resolved to one device
    bad = lucid("fit", "solo", "--trainer.devices", "2", env=env)
    assert bad.returncode == 2
    assert "multi_device=False" in bad.stderr and "Traceback" not in bad.stderr
    ddp = lucid("fit", "solo", "--trainer.strategy", "ddp", env=env)
    assert ddp.returncode == 2 and "strategy" in ddp.stderr


def test_broken_plugin_is_listed_with_its_error_and_breaks_nothing_else(lucid, plugin_root):
    env = env_with(plugin_root)
    tasks = _tasks(lucid("plugins", "--json", env=env))
    assert tasks["broken"]["status"] == "error"
    assert "broken on purpose" in tasks["broken"]["error"]
    assert tasks["det"]["status"] == "ok" and tasks["solo"]["status"] == "ok"
    assert lucid("--help", env=env).returncode == 0
    assert lucid("fit", "det", "--print-config", env=env).returncode == 0
    used = lucid("fit", "broken", env=env)
    assert used.returncode == 2 and "broken on purpose" in used.stderr and "Traceback" not in used.stderr


def test_allow_list_env_restricts_external_plugins(lucid, plugin_root):
    none = _tasks(lucid("plugins", "--json", env=env_with(plugin_root, allow="")))
    assert none["solo"]["status"] == "skipped" and none["broken"]["status"] == "skipped"
    assert none["det"]["status"] == "ok"  # built-ins always load
    only = _tasks(lucid("plugins", "--json", env=env_with(plugin_root, allow="lucid-solo")))
    assert only["solo"]["status"] == "ok" and only["broken"]["status"] == "skipped"
    refused = lucid("fit", "solo", "--print-config", env=env_with(plugin_root, allow="other"))
    assert refused.returncode == 2 and "LUCIDYOLO_PLUGINS" in refused.stderr


def test_incompatible_api_version_is_refused(lucid, tmp_path):
    write_distribution(tmp_path, "lucid-old", "lucid_old", "oldapi", OLD_API)
    tasks = _tasks(lucid("plugins", "--json", env=env_with(tmp_path)))
    error = tasks["oldapi"]["error"]
    assert tasks["oldapi"]["status"] == "error"
    assert "plugin API 1.0" in error and "plugin API 3.0" in error  # names both versions
    used = lucid("fit", "oldapi", "--print-config", env=env_with(tmp_path))
    assert used.returncode == 2 and "plugin API 1.0" in used.stderr


def test_newer_minor_api_version_loads_with_a_warning():
    from lucidyolo.tasks.api import PLUGIN_API_VERSION, api_version_problem

    major, minor = PLUGIN_API_VERSION
    assert api_version_problem((major, minor)) is None
    level, message = api_version_problem((major, minor + 1))  # type: ignore[misc]
    assert level == "warning" and f"{major}.{minor + 1}" in message
    assert api_version_problem((major + 1, 0))[0] == "error"  # type: ignore[index]
    assert api_version_problem("2")[0] == "error"  # type: ignore[index]


def test_conflicting_alias_is_reported_naming_both_plugins(lucid, tmp_path):
    write_distribution(tmp_path, "lucid-thief", "lucid_thief", "thief", STEALS_ALIAS)
    env = env_with(tmp_path)
    tasks = _tasks(lucid("plugins", "--json", env=env))
    assert tasks["thief"]["status"] == "conflict"
    assert "lucid_thief" in tasks["thief"]["error"] and "lucidyolo.tasks.detect" in tasks["thief"]["error"]
    used = lucid("fit", "detect", "--print-config", env=env)
    assert used.returncode == 2 and "claimed by several plugins" in used.stderr


def test_builtin_specs_pass_the_plugin_contract_check():
    from lucidyolo.tasks.registry import discover
    from lucidyolo.testing import check_task_spec

    for rec in discover():
        if rec.builtin:
            check_task_spec(rec.spec, run_hooks=False)


def test_contract_check_runs_every_detection_hook_on_tiny_inputs(tmp_path):
    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    done = exercise_hooks(get_task("det"), workdir=tmp_path)
    assert set(done) == {
        "make_synthetic", "augment", "build_model", "build_criterion", "decode", "build_metric", "predict", "draw",
        "evaluate", "gate.score", "export.deploy", "export.check", "transfer_weights",
    }
    assert "classes: 4 of 5 matched by name" in done["transfer_weights"]
    assert done["evaluate"] == ["e2e", "nms"] and "rows matched" in done["export.check"]
    assert done["augment"].startswith("4 mosaic samples flipped and mirrored")
    assert done["decode"][1:] == (300, 6) and done["build_criterion"] == ["box", "cls", "l1"]


def test_contract_check_runs_every_keypoint_hook_and_records_the_protocol_refusal(tmp_path):
    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    done = exercise_hooks(get_task("pose"), workdir=tmp_path)
    assert done["decode"][1:] == (300, 6) and done["build_criterion"] == ["box", "cls", "kpt", "kvis", "l1", "oks"]
    assert "points compared" in done["export.check"] and "flipped and mirrored" in done["augment"]
    # the synthetic symbols have 7 points: COCO's keypoint protocol (17 person sigmas) refuses them
    assert done["evaluate"].startswith("refused: ") and "17 person points" in done["evaluate"]


def test_contract_check_runs_every_obb_hook(tmp_path):
    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    done = exercise_hooks(get_task("oriented"), workdir=tmp_path)
    assert done["decode"][1:] == (300, 7) and done["build_criterion"] == ["angle", "box", "cls", "l1"]
    assert done["evaluate"] == ["e2e", "nms"] and "rows matched" in done["export.check"]
    assert "flipped and mirrored" in done["augment"]


def _swap_field(monkeypatch, name, **changes):
    """Replace a registered field's rules for one test (the registry is process-wide)."""
    import dataclasses

    from lucidyolo.structures import fields

    broken = dataclasses.replace(fields.get_field(name), **changes)
    monkeypatch.setitem(fields._FIELDS, name, broken)
    for attr in broken.attrs:
        monkeypatch.setitem(fields._ATTRS, attr.name, (broken, attr))


def test_contract_check_refuses_a_geometric_field_without_a_flip_rule(tmp_path, monkeypatch):
    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    spec = get_task("obb")
    _swap_field(monkeypatch, "rboxes", flip=None)
    with pytest.raises(AssertionError, match="field 'rboxes' has an affine rule but no flip rule"):
        exercise_hooks(spec, workdir=tmp_path)


def test_contract_check_refuses_a_flip_rule_that_does_not_undo_itself(tmp_path, monkeypatch):
    from lucidyolo.structures import fields
    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    spec = get_task("obb")
    good = fields.get_field("rboxes").flip

    def drifting(values, right, meta):  # mirrors the centres and shrinks them by 1 %: not its own inverse
        out = good(values, right, meta)
        out["rboxes"] = (out["rboxes"] * [0.99, 1, 1, 1, 1]).astype("float32")
        return out

    _swap_field(monkeypatch, "rboxes", flip=drifting)
    with pytest.raises(AssertionError, match="field 'rboxes' .*mirrored twice is not the unflipped sample"):
        exercise_hooks(spec, workdir=tmp_path)


def test_contract_check_fails_on_a_failed_export_parity(tmp_path):
    import dataclasses

    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    det = get_task("det")
    assert det.export is not None and det.export.check is not None

    def disagreeing(**_):
        return {"passed": False, "summary": "3 rows differ"}

    liar = dataclasses.replace(det, export=dataclasses.replace(det.export, check=disagreeing))
    with pytest.raises(AssertionError, match="export.check: onnxruntime disagrees with PyTorch: 3 rows differ"):
        exercise_hooks(liar, workdir=tmp_path)


def test_contract_check_names_the_hook_that_breaks_its_contract(tmp_path):
    import dataclasses

    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    det = get_task("det")
    liar = dataclasses.replace(det, loss_terms=("box", "cls"))  # the criterion also returns l1
    with pytest.raises(AssertionError, match="loss_terms"):
        exercise_hooks(liar, workdir=tmp_path)


def test_contract_check_reports_violations():
    from pydantic import ConfigDict

    from lucidyolo.config.schema import ModelConfig
    from lucidyolo.tasks.api import TaskSpec
    from lucidyolo.testing import check_task_spec

    class Lax(ModelConfig):
        model_config = ConfigDict(extra="allow")

    with pytest.raises(AssertionError) as info:
        check_task_spec(TaskSpec(name="Bad-Name", config_model=Lax, api_version=0, build_model=3))  # type: ignore[arg-type]
    text = str(info.value)
    for fragment in ("plugin API 0.0", "Bad-Name", "extra='forbid'", "build_model"):
        assert fragment in text
    with pytest.raises(AssertionError):
        check_task_spec(object())


@pytest.mark.parametrize(
    "name, wrong",
    [
        ("identity", lambda good: lambda values, right, meta: {"rboxes": values["rboxes"].copy()}),
        # consistent with itself (twice is the identity) but one pixel off the mirror
        ("W - x + 1", lambda good: lambda values, right, meta: good(values, right + 1.0, meta)),
        ("vertical", lambda good: lambda values, right, meta: {
            "rboxes": (values["rboxes"] * [1, -1, 1, 1, -1] + [0, right, 0, 0, 0]).astype("float32")}),
    ],
)
def test_contract_check_refuses_a_self_consistent_flip_that_is_not_the_mirror(tmp_path, monkeypatch, name, wrong):
    """Each of these flips undoes itself, so only the comparison with the field's own affine rule under the
    mirror matrix finds them."""
    from lucidyolo.structures import fields
    from lucidyolo.tasks.registry import get_task
    from lucidyolo.testing import exercise_hooks

    _swap_field(monkeypatch, "rboxes", flip=wrong(fields.get_field("rboxes").flip))
    with pytest.raises(AssertionError, match="field 'rboxes' \\(rboxes\\): its flip rule is not its affine rule"):
        exercise_hooks(get_task("obb"), workdir=tmp_path)


def test_contract_check_compares_keypoint_flips_up_to_the_left_right_swap(tmp_path, monkeypatch):
    """The keypoint flip permutes by flip_idx, which the affine rule does not: the right flip passes, a flip
    that forgets to mirror x fails."""
    from lucidyolo.structures import fields
    from lucidyolo.testing import _flip_is_the_mirror

    spec = fields.get_field("keypoints")
    kp = np.array([[[10.0, 5.0], [30.0, 6.0], [20.0, 9.0]]], np.float32)
    values = {"keypoints": kp, "visibility": np.array([[2.0, 1.0, 2.0]], np.float32)}
    mirror, meta = np.array([[-1.0, 0.0, 64.0], [0.0, 1.0, 0.0]]), {"flip_idx": [1, 0, 2]}
    assert _flip_is_the_mirror(spec, values, 1, mirror, meta)
    unmirrored = dataclasses.replace(spec, flip=lambda v, right, meta: {"keypoints": v["keypoints"][:, [1, 0, 2]],
                                                                       "visibility": v["visibility"][:, [1, 0, 2]]})
    with pytest.raises(AssertionError, match="field 'keypoints' \\(keypoints\\)"):
        _flip_is_the_mirror(unmirrored, values, 1, mirror, meta)
