"""Plugins written for plugin API 2.x load through the adapter and keep their contract for the 3.x line.

The copies in ``tests/frozen_plugins`` are the cls plugin (API 2.4) and the point-task test plugin
(API 2.5) as they were, package names aside. Each runs in its own process: their fields have the same
names as the live plugins' (one registry per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FROZEN = Path(__file__).resolve().parents[1] / "frozen_plugins"
PLUGINS = {  # entry point -> (distribution, module:attribute, api version)
    "cls": ("lucidyolo-cls-v2-4", "lucidyolo_cls_v2_4.task:SPEC", (2, 4)),
    "points": ("lucid-points-v2-5", "lucid_points_v2_5:SPEC", (2, 5)),
}


def _env(site: Path | None = None) -> dict[str, str]:
    paths = [str(FROZEN), *([str(site)] if site else []), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.mark.parametrize("entry", sorted(PLUGINS))
def test_a_frozen_2x_plugin_passes_its_contract_check_through_the_adapter(entry, tmp_path):
    _, target, version = PLUGINS[entry]
    module, _, attr = target.partition(":")
    code = (
        "import json\n"
        f"from {module} import {attr} as spec\n"
        "from lucidyolo.tasks.api import TaskSpec\n"
        "from lucidyolo.testing import check_task_spec\n"
        "assert type(spec) is TaskSpec and spec.roles is None  # the flat 2.x record, as written\n"
        "done = check_task_spec(spec)\n"
        "print(json.dumps({'version': list(spec.api_version), 'done': sorted(done)}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert tuple(out["version"]) == version
    assert {"make_synthetic", "augment", "build_model", "build_criterion", "decode", "build_metric"} <= set(out["done"])


def _install(site: Path) -> dict[str, str]:
    for entry, (dist, target, _) in PLUGINS.items():
        info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[lucidyolo.tasks]\n{entry} = {target}\n")
    # the live cls plugin is installed too: the allow-list keeps the frozen copies' names to themselves
    return {**_env(site), "LUCIDYOLO_PLUGINS": ",".join(dist for dist, _, _ in PLUGINS.values())}


def test_the_registry_loads_frozen_2x_plugins_and_refuses_an_unknown_major(lucid, tmp_path):
    env = _install(tmp_path / "site")
    r = lucid("plugins", "--json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    tasks = {t["name"]: t for t in json.loads(r.stdout)["tasks"] if t["status"] != "skipped"}
    for entry, (dist, _, version) in PLUGINS.items():
        assert tasks[entry]["status"] == "ok" and tasks[entry]["distribution"] == dist, tasks[entry]
        assert tasks[entry]["api_version"] == ".".join(map(str, version)) and tasks[entry]["adapted"] is True
    assert tasks["det"]["adapted"] is False


@pytest.mark.slow
def test_a_frozen_2x_plugin_trains_through_lucid_fit(lucid, tmp_path):
    """The engine runs the adapted record end to end: two epochs of the frozen point plugin on its own set."""
    env = _install(tmp_path / "site")
    root = tmp_path / "dots"
    made = subprocess.run([sys.executable, "-c", "import sys; from lucid_points_v2_5.synthetic import make_synthetic; "
                           "make_synthetic(sys.argv[1], 24, 128, seed=0)", str(root)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    r = lucid("fit", "points", "--data-root", str(root), "--trainer.max_epochs", "2", "--data.num_workers", "0",
              "--trainer.default_root_dir", str(tmp_path / "runs"), env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert next((tmp_path / "runs").rglob("best.ckpt")).is_file()
