"""Rules between config fields are the schema's validators: every way of making a config meets them.

The single-device rule (a task whose capabilities say ``multi_device=False``
trains on one device in one process) is checked on each path that makes a run
config: the CLI's dotted overrides, a ``--config`` file, ``--resume`` (the
checkpoint's stored config), a config built in Python (``TaskSpec.run_config``,
``run_fit`` with a config changed after validation, ``lucidyolo.Model``) and
checkpoint restore, which normalises instead of refusing (it never trains).
No test trains.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from lucidyolo.config.resolve import config_to_yaml, resolve_config, validate_config
from lucidyolo.config.schema import device_count
from lucidyolo.errors import ConfigError
from lucidyolo.tasks.registry import get_task

RULE = "asks for 2 devices, but task 'obb' trains on exactly one"


def _plain(text: str) -> str:
    """Rich wraps the CLI's paragraph at the terminal width: compare with single spaces."""
    return " ".join(text.split())


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: content hash and modification time (ns)."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _obb_config(**trainer: object) -> dict:
    """A resolved obb config (JSON form, as config.yaml and checkpoints hold it) with ``trainer`` keys changed."""
    raw = yaml.safe_load(config_to_yaml(resolve_config(get_task("obb"))))
    raw["trainer"].update(trainer)
    return raw


# ------------------------------------------------------------------ one parser of trainer.devices


@pytest.mark.parametrize(("devices", "count"), [
    (1, 1), (2, 2), ("2", 2), (" 3 ", 3), ([0, 1], 2), ([3], 1), ("0,1", 2), ("0,", 1), (-1, -1), ("-1", -1),
    ("auto", None),
])
def test_device_count_reads_every_form(devices, count):
    assert device_count(devices) == count


@pytest.mark.parametrize("devices", ["two", "", 0, "0", -2, "cuda:0"])
def test_device_count_refuses_what_no_trainer_understands(devices):
    with pytest.raises(ValueError, match="not a device count"):
        device_count(devices)


def test_a_device_value_nobody_understands_is_refused_for_every_task():
    with pytest.raises(ConfigError, match=r"`trainer.devices` = 'two': is not a device count"):
        resolve_config(get_task("det"), overrides={"trainer": {"devices": "two"}})


def test_processes_per_host_use_the_same_parser():
    from lucidyolo.engine.loop.build import local_ranks

    det = get_task("det")

    def ranks(devices: object) -> int:
        return local_ranks(resolve_config(det, overrides={"trainer": {"devices": devices}}), cuda=False)

    assert [ranks(d) for d in ([0, 1], "0,1", "2", 2, "auto", -1)] == [2, 2, 2, 2, 1, 1]


# ------------------------------------------------------------------ Python


def test_the_task_config_class_carries_the_rule():
    obb = get_task("obb")
    assert obb.run_config is obb.run_config  # one class per task: its configs are instances of it
    with pytest.raises(ValidationError, match=RULE) as err:
        obb.run_config(model={"task": "obb"}, trainer={"devices": 2})
    assert "Fix: Set `trainer.devices` to 1" in str(err.value)
    with pytest.raises(ConfigError, match=RULE) as err:
        validate_config(obb, _obb_config(devices=2))
    assert "multi_device=False" in (err.value.why or "") and "`trainer.devices` to 1" in (err.value.fix or "")
    assert "<config>" not in str(err.value)  # the rule's own message, not pydantic's dump of the whole input
    with pytest.raises(ConfigError, match="starts several processes"):
        validate_config(obb, _obb_config(strategy="ddp"))
    with pytest.raises(ConfigError, match="`trainer.num_nodes` = 2"):
        validate_config(obb, _obb_config(num_nodes=2))


@pytest.mark.parametrize("task", ["obb", "keypoints"])
def test_single_device_tasks_take_auto_as_one_device(task):
    spec = get_task(task)
    assert spec.run_config.model_validate({"model": {"task": task, "num_keypoints": 5} if task == "keypoints"
                                           else {"task": task}}).trainer.devices == 1


@pytest.mark.parametrize("task", ["det", "seg"])
@pytest.mark.parametrize("devices", [2, "2", [0, 1], "0,1", -1])
def test_multi_device_tasks_still_take_several_devices(task, devices):
    spec = get_task(task)
    assert resolve_config(spec, overrides={"trainer": {"devices": devices}}).trainer.devices == devices
    assert spec.run_config(model={"task": task}, trainer={"devices": devices, "strategy": "ddp"}).trainer.devices == devices


def test_a_config_changed_after_validation_is_checked_again_before_fit(tmp_path):
    """``cfg.trainer.devices = 2`` validates the trainer section alone; ``run_fit`` validates the whole run again."""
    from lucidyolo.engine.loop.fit import run_fit

    spec = get_task("obb")
    cfg = resolve_config(spec, overrides={"trainer": {"default_root_dir": str(tmp_path / "runs")}})
    cfg.trainer.devices = 2
    with pytest.raises(ConfigError, match=RULE):
        run_fit(spec, cfg)
    assert not (tmp_path / "runs").exists()


def test_the_python_api_refuses_two_devices_for_obb(tmp_path):
    from lucidyolo import Model

    with pytest.raises(ConfigError, match=RULE):
        Model.new("obb").fit(trainer__devices=2, trainer__default_root_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ the CLI, a --config file, --resume


def test_cli_override_exits_2_with_the_rule(lucid, tmp_path):
    r = lucid("fit", "obb", "--trainer.devices", "2", "--trainer.default_root_dir", str(tmp_path / "runs"),
              cwd=tmp_path)
    err = _plain(r.stderr)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"`trainer.devices` = 2 {RULE}" in err and "multi_device=False" in err
    assert not (tmp_path / "runs").exists()
    ok = lucid("fit", "seg", "--trainer.devices", "2", "--print-config", cwd=tmp_path)
    assert ok.returncode == 0 and "devices: 2" in ok.stdout


def test_config_file_asking_for_two_devices_exits_2(lucid, tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"model": {"task": "obb"}, "trainer": {"devices": 2}}))
    r = lucid("fit", "obb", "--config", str(path), "--print-config", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"`trainer.devices` = 2 {RULE}" in _plain(r.stderr)


@pytest.fixture
def edited_obb_run(tmp_path) -> Path:
    """An interrupted obb run (epoch 1 of 5 done) whose config, in ``config.yaml`` and in ``last.ckpt``, was edited
    to ask for 2 devices. ``--resume`` reads the checkpoint's copy; nothing is trained to write it."""
    import torch

    run = tmp_path / "runs" / "obb" / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    config = _obb_config(devices=2, max_epochs=5, default_root_dir=str(tmp_path / "runs" / "obb"))
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    torch.save({"epoch": 0, "global_step": 3, "state_dict": {},
                "lucid": {"config": {**config, "num_classes_resolved": 3}, "class_names": ["a", "b", "c"],
                          "dataset_meta": {}, "format": 2}},
               run / "checkpoints" / "last.ckpt")
    return run


def test_resume_of_a_run_edited_to_two_devices_exits_2_before_anything(lucid, edited_obb_run, tmp_path):
    before = _snapshot(edited_obb_run.parent)
    r = lucid("fit", "obb", "--resume", str(edited_obb_run), cwd=tmp_path)
    err = _plain(r.stderr)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"`trainer.devices` = 2 {RULE}" in err
    assert "`--resume` continues with the config stored in" in err and "--model.weights" in err
    assert "lucid fit obb:" not in r.stdout + err  # the run's first line: no set-up, no training, no DDP start
    assert _snapshot(edited_obb_run.parent) == before  # not a byte written, not a file added


# ------------------------------------------------------------------ checkpoint restore


def test_restore_brings_a_two_device_obb_checkpoint_to_one_device(tmp_path):
    """Eval, predict and export do not train: the checkpoint loads, its config says one device in one process."""
    import torch

    from lucidyolo.engine.weights.restore import restore

    spec = get_task("obb")
    config = _obb_config(devices=2, strategy="ddp")
    model = spec.build_model(cfg=spec.run_config.model_validate(_obb_config()).model, num_classes=3, meta={})
    path = tmp_path / "two_devices.ckpt"
    torch.save({"lucid": {"config": {**config, "num_classes_resolved": 3}, "class_names": ["a", "b", "c"],
                          "dataset_meta": {}, "format": 2},
                "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}, path)
    restored = restore(path)
    t = restored.config.trainer
    assert restored.spec.name == "obb" and (t.devices, t.strategy, t.num_nodes) == (1, "auto", 1)
    assert isinstance(restored.config, spec.run_config)
