"""Keys that moved to their section in 1.0 (``optim``, ``ema``, ``augment``) still work from their old place.

A source a user writes (a dotted option, a file) gets one warning line per old key naming the new one; a
stored config (a run's checkpoint) is read silently; a source setting both spellings is refused.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from lucidyolo.config.moved_keys import MOVED, MovedConfigKey, move_keys
from tests.conftest import run_lucid

# hand-written: where each old key lives since 1.0 (not read from MOVED, which is what is tested)
OLD_TO_NEW = {
    "model.lr": "optim.lr", "model.lrf": "optim.lrf", "model.momentum": "optim.momentum",
    "model.weight_decay": "optim.weight_decay", "model.warmup_epochs": "optim.warmup_epochs",
    "model.optimizer": "optim.optimizer", "model.lr_reference_batch": "optim.lr_reference_batch",
    "model.lr_scaling": "optim.lr_scaling", "model.newton_schulz_dtype": "optim.newton_schulz_dtype",
    "model.ema": "ema.enabled", "model.ema_decay": "ema.decay", "model.ema_tau": "ema.tau",
    "model.close_mosaic": "augment.close_mosaic", "data.mosaic": "augment.use_mosaic",
}


def test_every_moved_key_is_the_hand_written_list():
    assert {f"{a}.{b}": f"{c}.{d}" for (a, b), (c, d) in MOVED.items()} == OLD_TO_NEW


def _old_form(new: dict) -> dict:
    """A 1.0 config dict written the pre-1.0 way: every moved key back at its old place."""
    old = copy.deepcopy(new)
    for before, after in OLD_TO_NEW.items():
        (s0, k0), (s1, k1) = before.split("."), after.split(".")
        old.setdefault(s0, {})[k0] = old[s1].pop(k1)
    old["data"]["augment"] = {k: old["augment"].pop(k) for k in list(old["augment"])}
    for section in ("optim", "ema", "augment"):
        assert not old.pop(section)
    return old


def test_a_stored_pre_1_0_config_reads_as_the_same_config_silently(recwarn):
    from lucidyolo.tasks.registry import get_task

    cls = get_task("det").run_config
    new = cls.model_validate({"model": {"task": "det"}, "optim": {"lr": 0.02, "warmup_epochs": 2},
                              "ema": {"tau": 300.0, "enabled": False}, "augment": {"scale": 0.3, "close_mosaic": 4,
                                                                                     "use_mosaic": False}})
    old = _old_form(new.model_dump(mode="json"))
    assert old["model"]["lr"] == 0.02 and old["data"]["augment"]["scale"] == 0.3 and old["data"]["mosaic"] is False
    assert cls.model_validate(old) == new
    assert not [w for w in recwarn if issubclass(w.category, MovedConfigKey)]  # a checkpoint is not the user's typo


def test_a_written_old_key_warns_once_naming_the_new_key():
    with pytest.warns(MovedConfigKey, match=r"`model\.ema_tau` is now `ema\.tau`"):
        assert move_keys({"model": {"ema_tau": 50, "variant": "s"}}) == {"model": {"variant": "s"}, "ema": {"tau": 50}}
    with pytest.raises(ValueError, match="both set"):
        move_keys({"model": {"lr": 0.1}, "optim": {"lr": 0.2}}, warn=False)


def test_old_keys_through_lucid_fit(tmp_path):
    """A dotted option and a pre-1.0 config file resolve with a warning line each; both spellings at once: exit 2."""
    old_file = tmp_path / "old.yaml"
    old_file.write_text(yaml.safe_dump({"model": {"lr": 0.03, "close_mosaic": 2}, "data": {"augment": {"mixup": 0.1}}}))
    r = run_lucid("fit", "det", "--config", str(old_file), "--model.ema_tau", "77", "--print-config")
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load(r.stdout)
    assert (cfg["optim"]["lr"], cfg["augment"]["close_mosaic"], cfg["augment"]["mixup"], cfg["ema"]["tau"]) == (
        0.03, 2, 0.1, 77.0)
    for old, new in (("model.lr", "optim.lr"), ("data.augment.mixup", "augment.mixup"), ("model.ema_tau", "ema.tau")):
        assert f"warning: `{old}` is now `{new}`" in r.stderr, r.stderr
    both = run_lucid("fit", "det", "--model.lr", "0.02", "--optim.lr", "0.03", "--print-config")
    assert both.returncode == 2 and "`model.lr` and `optim.lr` are both set" in both.stderr
    assert "Traceback" not in both.stderr
