"""Every example under ``examples/`` runs as its README says (tiny synthetic set, 64 px, one epoch).

The scripts run as a user runs them: ``bash run.sh`` with ``lucid`` found on
PATH, ``python examples/python_api.py``; the plugin template is found through a
real entry point. What they write is checked, not just their exit code.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import BIN, REPO, run_lucid

EXAMPLES = REPO / "examples"
TEMPLATE = EXAMPLES / "task_plugin_template"
IMG = 64
# Appended to `lucid fit` by the scripts: in-process loading (worker start-up would cost more
# than these two steps) and two training batches per epoch.
FAST = ("--data.num_workers", "0", "--data.batch_size", "4", "--trainer.limit_train_batches", "2")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")  # the scripts call `lucid` from PATH
    env.setdefault("COLUMNS", "200")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep __pycache__ out of examples/
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert r.returncode == 0, f"{cmd[:2]} exited {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="session")
def shapes(tmp_path_factory) -> dict[str, Path]:
    """One tiny synthetic detection set per session (6 train / 2 val images), as a YOLO root and a COCO container."""
    base = tmp_path_factory.mktemp("shapes")
    out = {}
    for fmt in ("yolo", "coco"):
        r = run_lucid("data", "synth", "--task", "det", "--format", fmt, "--images", "8", "--img-size", str(IMG),
                      "--out", str(base / fmt))
        assert r.returncode == 0, r.stderr
        out[fmt] = base / fmt
    return out


def _check_outputs(work: Path, run: str, val_images: list[Path]) -> dict:
    """What both run.sh scripts promise: eval report + results JSON, predictions JSON, drawn images."""
    ckpt = work / "runs" / run / "checkpoints" / "best.ckpt"
    assert ckpt.is_file()
    report = json.loads((work / "eval" / "report.json").read_text())
    assert report["checkpoint"] == str(ckpt) and report["task"] == "det"
    assert report["img_size"] == IMG and report["num_images"] == len(val_images)
    assert set(report["paths"]) == {"e2e", "nms"}
    for rows in (json.loads((work / "eval" / n).read_text()) for n in ("detections.json", "detections_nms.json")):
        assert isinstance(rows, list) and all(set(r) >= {"image_id", "category_id", "bbox", "score"} for r in rows)
    pred = json.loads((work / "predictions.json").read_text())
    assert [Path(p["image"]).name for p in pred["images"]] == [p.name for p in val_images]
    assert pred["conf"] == 0.0 and sum(len(p["predictions"]) for p in pred["images"]) > 0
    for p in pred["images"]:
        for d in p["predictions"]:
            x1, y1, x2, y2 = d["box"]
            assert 0 <= x1 <= x2 <= p["width"] and 0 <= y1 <= y2 <= p["height"]  # original-image pixels
    assert sorted(f.name for f in (work / "predictions").iterdir()) == [p.name for p in val_images]
    return report


@pytest.mark.slow
def test_train_yolo_folder_script_runs_end_to_end(shapes, tmp_path):
    root, work = shapes["yolo"], tmp_path / "work"
    # Earlier runs in the work folder: the script must take the run it just trained
    # (version_11, numerically highest), not version_7 (last in glob order) or version_10.
    for old in ("version_7", "version_10"):
        (work / "runs" / old).mkdir(parents=True)
    r = _run(["bash", str(EXAMPLES / "train_yolo_folder" / "run.sh"), str(root), str(work), *FAST],
             _env(IMG_SIZE=str(IMG), EPOCHS="1", CONF="0"), cwd=tmp_path)
    assert re.search(r"│ train\s*│ yolo\s*│.*│ ok", r.stdout) and re.search(r"│ val\s*│ yolo\s*│.*│ ok", r.stdout)
    assert f"checkpoint: {work}/runs/version_11/checkpoints/best.ckpt" in r.stdout
    cfg = yaml.safe_load((work / "runs" / "version_11" / "config.yaml").read_text())
    assert cfg["data"]["img_size"] == IMG and cfg["trainer"]["max_epochs"] == 1
    assert cfg["trainer"]["limit_train_batches"] == 2  # options after WORKDIR reach `lucid fit`
    _check_outputs(work, "version_11", sorted((root / "images" / "val").glob("*.jpg")))


@pytest.mark.slow
def test_train_coco_json_script_runs_end_to_end(shapes, tmp_path):
    # An export with names no layout convention knows, so only the explicit paths can find it.
    export = tmp_path / "export"
    paths = {}
    for split in ("train", "val"):
        paths[f"{split}_images"] = shutil.copytree(shapes["coco"] / split, export / f"pictures_{split}")
        paths[f"{split}_json"] = shutil.copy(shapes["coco"] / "annotations" / f"instances_{split}.json",
                                            export / f"{split}_labels.json")
    work = tmp_path / "work"
    args = [str(paths[k]) for k in ("train_images", "train_json", "val_images", "val_json")]
    r = _run(["bash", str(EXAMPLES / "train_coco_json" / "run.sh"), *args, str(work), *FAST],
             _env(IMG_SIZE=str(IMG), EPOCHS="1", CONF="0"), cwd=tmp_path)
    assert re.search(r"│ train\s*│ coco-explicit\s*│", r.stdout) and re.search(r"│ val\s*│ coco-explicit\s*│", r.stdout)
    cfg = yaml.safe_load((work / "runs" / "version_0" / "config.yaml").read_text())
    assert cfg["data"]["train_ann_file"] == str(paths["train_json"])  # the paths are saved with the run
    assert cfg["data"]["val_images"] == str(paths["val_images"])
    _check_outputs(work, "version_0", sorted(Path(paths["val_images"]).glob("*.jpg")))
    gt_ids = {c["id"] for c in json.loads(Path(paths["val_json"]).read_text())["categories"]}
    detected = {row["category_id"] for row in json.loads((work / "eval" / "detections.json").read_text())}
    assert detected <= gt_ids  # the dataset's own category ids, as the README says


def _readme_layout_rows() -> list[tuple[str, str, str]]:
    """``(layout, train images, train annotations)`` rows of the COCO README's layout table."""
    text = (EXAMPLES / "train_coco_json" / "README.md").read_text()
    return re.findall(r"^\| `(coco-[\w-]+)` \| `ROOT/([^`]+)/` \| `ROOT/([^`]+)` \|$", text, flags=re.M)


def test_coco_readme_lists_every_coco_layout():
    from lucidyolo.data.layouts import COCO_LAYOUTS

    assert sorted(row[0] for row in _readme_layout_rows()) == sorted(COCO_LAYOUTS)


@pytest.mark.parametrize("layout", [row[0] for row in _readme_layout_rows()])
def test_coco_readme_layout_is_recognised_from_the_root(layout, shapes, tmp_path):
    """Files placed as the README's table says are found with --data-root alone, as that layout."""
    _, images, ann = next(row for row in _readme_layout_rows() if row[0] == layout)
    root = tmp_path / "root"
    for split in ("train", "val"):
        img_dir, ann_file = root / images.replace("train", split), root / ann.replace("train", split)
        shutil.copytree(shapes["coco"] / split, img_dir)
        ann_file.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shapes["coco"] / "annotations" / f"instances_{split}.json", ann_file)
    r = run_lucid("data", "check", "--data-root", str(root), "--json")
    assert r.returncode == 0, r.stderr
    found = {s["split"]: s["layout"] for s in json.loads(r.stdout)["splits"]}
    assert found == {"train": layout, "val": layout}


@pytest.mark.slow
def test_python_api_example_trains_scores_and_predicts(tmp_path):
    work = tmp_path / "work"
    r = _run([sys.executable, str(EXAMPLES / "python_api.py"), "--workdir", str(work), "--conf", "0",
              "--finetune-epochs", "1"], _env(), cwd=tmp_path)
    assert (work / "data" / "annotations").is_dir()  # no --data-root: the synthetic set was written
    best = work / "runs" / "version_0" / "checkpoints" / "best.ckpt"
    line = next(x for x in r.stdout.splitlines() if x.startswith("run folder "))
    assert line.startswith(f"run folder {best.parent.parent}; best checkpoint best.ckpt; ") and " val/mAP50 " in line
    report = json.loads((work / "eval.json").read_text())
    assert report["checkpoint"] == str(best) and report["img_size"] == IMG
    for path in ("e2e", "nms"):
        ap = report["paths"][path]["bbox"]["stats"]["AP"]
        assert f"eval {path} bbox: AP {ap:.4f}" in r.stdout  # the printed numbers are the report's
    assert re.search(r"^\d+ detection\(s\) at conf >= 0.0 in .*/data/val/\S+\.jpg \(64x64\)$", r.stdout, flags=re.M)
    tuned = json.loads((work / "runs" / "version_1" / "transfer.json").read_text())
    assert tuned["classes"]["new"] == [] and len(tuned["classes"]["matched"]) == 4
    assert f"fine-tuned into {work / 'runs' / 'version_1'}: {tuned['summary']}" in r.stdout


def test_python_api_example_reports_a_user_error_with_exit_2(tmp_path):
    """A bad argument surfaces as the library's what/why/fix message, not a traceback."""
    r = subprocess.run([sys.executable, str(EXAMPLES / "python_api.py"), "--workdir", str(tmp_path),
                        "--data-root", str(tmp_path / "missing"), "--img-size", "100"],
                       capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "data.img_size" in r.stderr and "multiple of 32" in r.stderr


CONFIG = EXAMPLES / "config_with_comments.yaml"


def test_config_with_comments_resolves_through_the_cli_and_the_api(lucid):
    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.tasks.registry import get_task

    r = lucid("fit", "det", "--config", str(CONFIG), "--print-config")
    assert r.returncode == 0, r.stderr
    spec = get_task("det")
    cfg = resolve_config(spec, configs=[str(CONFIG)])
    assert yaml.safe_load(r.stdout) == cfg.model_dump(mode="json")
    # The file says every value in it is the built-in default ("on its own changes nothing").
    assert cfg.model_dump() == resolve_config(spec).model_dump()
    raw = yaml.safe_load(CONFIG.read_text())
    assert set(raw) == {"model", "optim", "ema", "augment", "data", "trainer", "seed"}  # every section shown


def test_config_with_comments_explains_every_key_it_sets():
    from lucidyolo.config.schema import RunConfig

    lines = CONFIG.read_text().splitlines()
    for i, line in enumerate(lines):
        key = re.match(r"^(\s*)(\w+):", line)
        if key is None or key.group(2) in RunConfig.section_names():  # section headers
            continue
        above = lines[i - 1].strip() if i else ""
        assert above.startswith("#"), f"line {i + 1} `{line.strip()}` has no comment above it"


@pytest.fixture
def template_module(monkeypatch):
    """Import the template's package from its folder (nothing installed), then forget it."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(TEMPLATE))
    import my_task.hooks
    import my_task.task

    yield my_task.task, my_task.hooks
    for name in [m for m in sys.modules if m == "my_task" or m.startswith("my_task.")]:
        del sys.modules[name]


def _documented_hook_arguments() -> dict[str, list[str]]:
    """Each hook's arguments as the plugin API docstring documents them (``build_model(cfg, ...)``)."""
    import lucidyolo.tasks.api as api
    from lucidyolo.tasks.api import TaskSpec

    found: dict[str, list[str]] = {}
    for name, args in re.findall(r"``(\w+)\(([^)]*)\)", api.__doc__ or ""):
        found.setdefault(name, [a.strip() for a in args.split(",") if a.strip()])  # the first is the contract
    return {h: found[h] for h in TaskSpec.HOOKS if h in found}


def test_task_plugin_template_passes_the_contract_check(template_module):
    from lucidyolo.tasks.api import TaskSpec, lazy_hook
    from lucidyolo.testing import check_task_spec

    task, hooks = template_module
    check_task_spec(task.TASK, run_hooks=False)
    spec = task.TASK.record()  # the flat record the engine reads
    entry = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]["entry-points"]["lucidyolo.tasks"]
    assert entry == {spec.name: "my_task.task:TASK"}
    assert not spec.trainable and spec.missing_hooks(*TaskSpec.FIT_HOOKS) == list(TaskSpec.FIT_HOOKS)

    # Once every stub is written and listed in IMPLEMENTED, the same spec is complete and valid.
    filled = dataclasses.replace(spec, **{h: lazy_hook(f"my_task.hooks:{h}") for h in TaskSpec.HOOKS})
    check_task_spec(filled, run_hooks=False)
    assert filled.trainable
    documented = _documented_hook_arguments()
    assert set(documented) == set(TaskSpec.HOOKS), "a hook's signature is missing from lucidyolo/tasks/api.py"
    for hook in TaskSpec.HOOKS:
        fn = getattr(filled, hook).resolve()  # the lazy string names a real function
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind is not p.VAR_KEYWORD]
        assert [p.name for p in params] == documented[hook], f"stub {hook} differs from the documented contract"
        with pytest.raises(NotImplementedError, match=rf"my_task\.hooks\.{hook} .*plugins/lucidyolo-cls"):
            fn(**{p.name: None for p in params}, added_in_a_later_minor_version=1)


def test_task_plugin_template_is_found_through_its_entry_point(tmp_path):
    """With the template on PYTHONPATH and a dist-info built from its pyproject.toml, lucid lists and uses it."""
    project = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]
    dist, version = project["name"], project["version"]
    info = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    eps = project["entry-points"]["lucidyolo.tasks"]
    (info / "entry_points.txt").write_text("[lucidyolo.tasks]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    env = {"PYTHONPATH": os.pathsep.join([str(TEMPLATE), str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "PYTHONDONTWRITEBYTECODE": "1"}

    listed = run_lucid("plugins", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    row = next(t for t in json.loads(listed.stdout)["tasks"] if t["name"] == "my_task")
    assert row["status"] == "ok" and row["trainable"] is False and row["builtin"] is False, row
    assert row["distribution"] == dist and row["api_version"] == "3.0" and row["adapted"] is False

    shown = run_lucid("fit", "my_task", "--print-config", "--model.my_loss_gain", "2", env=env)
    assert shown.returncode == 0, shown.stderr
    model = yaml.safe_load(shown.stdout)["model"]
    assert model["task"] == "my_task" and model["my_loss_gain"] == 2.0
    refused = run_lucid("fit", "my_task", env=env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "build_model" in refused.stderr and "metric_update" in refused.stderr

    # The spec module stays torch-free: `lucid --help` and `lucid plugins` import it.
    probe = "import sys, my_task.task; assert 'torch' not in sys.modules, 'my_task.task imported torch'"
    light = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=60)
    assert light.returncode == 0, light.stderr
