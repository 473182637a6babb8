"""Configuration through the real console script: suggestions, precedence, rules."""

from __future__ import annotations

import subprocess
import sys

import yaml


def _config(result) -> dict:
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_unknown_key_names_the_full_dotted_suggestion(lucid):
    r = lucid("fit", "det", "--data.batch_sise", "8")
    assert r.returncode == 2
    assert "data.batch_size" in r.stderr and "Traceback" not in r.stderr


def test_key_in_the_wrong_section_is_found_elsewhere(lucid):
    r = lucid("fit", "det", "model.batch_size=8")
    assert r.returncode == 2 and "data.batch_size" in r.stderr


def test_override_precedence_defaults_preset_file_cli(lucid, tmp_path):
    user = tmp_path / "mine.yaml"
    user.write_text(yaml.safe_dump({"data": {"batch_size": 24, "img_size": 320}, "optim": {"lrf": 0.05}}))
    # the file is given before the preset on purpose: presets still sit below files
    cfg = _config(
        lucid(
            "fit", "det", "--config", str(user), "--config", "det_nano_smoke.yaml",
            "--data.batch_size", "32", "optim.lr=0.02", "--print-config",
        )
    )
    assert cfg["data"]["batch_size"] == 32  # CLI beats file and preset
    assert cfg["data"]["img_size"] == 320  # file beats preset (640)
    assert cfg["optim"]["lrf"] == 0.05  # file beats preset (0.01)
    assert cfg["optim"]["lr"] == 0.02  # key=value form
    assert cfg["trainer"]["max_epochs"] == 50  # preset beats the schema default
    assert cfg["optim"]["lr_reference_batch"] == 64  # schema default survives


def test_overrides_are_parsed_as_yaml(lucid):
    cfg = _config(lucid("fit", "det", "--trainer.devices=[0, 1]", "--data.cache_train_images", "true", "--print-config"))
    assert cfg["trainer"]["devices"] == [0, 1] and cfg["data"]["cache_train_images"] is True


def test_the_top_level_seed_is_an_override_too(lucid):
    assert _config(lucid("fit", "det", "--seed", "3", "--print-config"))["seed"] == 3
    assert _config(lucid("fit", "det", "seed=4", "--print-config"))["seed"] == 4
    assert _config(lucid("fit", "det", "--print-config"))["data"]["cache_train_images"] == "auto"


def test_img_size_must_be_a_multiple_of_32(lucid):
    r = lucid("fit", "det", "--data.img_size", "300")
    assert r.returncode == 2 and "multiple of 32" in r.stderr


def test_builtin_single_device_tasks_refuse_multi_process(lucid):
    r = lucid("fit", "pose", "--config", "pose_nano_smoke.yaml", "--trainer.devices", "0,1")
    assert r.returncode == 2 and "exactly one" in r.stderr
    assert lucid("fit", "det", "--trainer.devices", "2", "--print-config").returncode == 0


def test_keypoints_refuses_a_num_keypoints_the_data_contradicts(lucid, tmp_path):
    from lucidyolo.data.synth import write_synthetic

    root = write_synthetic(tmp_path / "pose", ("keypoints",), 4, img_size=64, fmt="yolo")  # 7 points per symbol
    r = lucid("fit", "pose", "--data-root", str(root), "--model.num_keypoints", "5", "--trainer.max_epochs", "1",
              "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "`model.num_keypoints` = 5" in r.stderr and "declares 7 keypoints" in r.stderr
    assert "Traceback" not in r.stderr and not list(tmp_path.rglob("*.ckpt"))


def test_config_for_another_task_is_refused(lucid):
    r = lucid("fit", "seg", "--config", "det_nano_smoke.yaml")
    assert r.returncode == 2 and "model.task" in r.stderr


def test_unknown_preset_and_task_get_suggestions(lucid):
    r = lucid("fit", "det", "--config", "det_nano_smok.yaml")
    assert r.returncode == 2 and "det_nano_smoke.yaml" in r.stderr
    r = lucid("fit", "dte")
    assert r.returncode == 2 and "Did you mean 'det" in r.stderr
    r = lucid("fit", "det", "stray")
    assert r.returncode == 2 and "stray" in r.stderr


def test_every_packaged_preset_resolves(lucid):
    for task, preset in [
        ("det", "det_nano_smoke.yaml"), ("det", "det_nano_overfit.yaml"), ("seg", "seg_nano_smoke.yaml"),
        ("seg", "seg_nano_overfit.yaml"), ("seg", "seg_nano_synthetic.yaml"),
        ("obb", "obb_nano_smoke.yaml"), ("keypoints", "pose_nano_smoke.yaml"),
            ("keypoints", "pose_nano_smoke_laplace_nll.yaml"), ("keypoints", "pose_nano_overfit.yaml"),
            ("keypoints", "pose_nano_synthetic.yaml"),
    ]:
        cfg = _config(lucid("fit", task, "--config", preset, "--print-config"))
        assert cfg["model"]["task"] == task and cfg["seed"] == 0 and cfg["trainer"]["deterministic"] is True


def test_help_and_plugins_do_not_import_torch_or_matplotlib():
    code = (
        "import sys\n"
        "from lucidyolo.cli.app import app\n"
        "for argv in (['--help'], ['plugins'], ['fit', '--help'], ['gate', '--help']):\n"
        "    try:\n"
        "        app(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in ('torch', 'pytorch_lightning', 'lightning', 'torchvision', 'matplotlib') if m in sys.modules)\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY=\n" in out.stdout, out.stdout[-500:]


def test_version_flag(lucid):
    r = lucid("--version")
    assert r.returncode == 0 and r.stdout.strip() == "lucid 1.0.0"  # the release this CHANGELOG's top entry describes


def test_resume_refuses_config_changes(lucid, tmp_path):
    r = lucid("fit", "det", "--resume", str(tmp_path), "--data.batch_size", "8")
    assert r.returncode == 2 and "--resume cannot be combined" in r.stderr
