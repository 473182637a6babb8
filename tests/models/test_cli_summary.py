"""``lucid model summary``: table and JSON output, user errors, torch-free import."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from lucidyolo.cli.model import app
from lucidyolo.errors import ConfigError, UserError

runner = CliRunner()


def test_summary_json_reports_params_and_gflops() -> None:
    result = runner.invoke(app, ["summary", "--variant", "s", "--task", "det", "--num-classes", "80", "--img-size", "640", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["model"] == "yolo26s"
    assert info["params"] == 10_009_784  # the published yolo26s layout, both branches (80 classes)
    assert 9.26e6 <= info["params_deploy"] <= 9.75e6  # the paper's 9.5 M is the deployed graph's, rounding and +-2 %
    assert 19.6 <= info["gflops"] <= 21.8


def test_summary_table_names_the_quantities() -> None:
    result = runner.invoke(app, ["summary", "--variant", "n", "--img-size", "320"])
    assert result.exit_code == 0, result.output
    assert "GFLOPs" in result.stdout and "yolo26n" in result.stdout and "2100" in result.stdout


def test_summary_bad_variant_and_size_raise_user_errors() -> None:
    result = runner.invoke(app, ["summary", "--variant", "q"])
    assert isinstance(result.exception, ConfigError)
    result = runner.invoke(app, ["summary", "--img-size", "300"])
    assert isinstance(result.exception, UserError)


def test_module_import_does_not_import_torch() -> None:
    code = "import sys, lucidyolo.cli.model; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_summary_of_the_seg_task_counts_prototypes_in_the_deployed_graph() -> None:
    result = runner.invoke(app, ["summary", "--variant", "n", "--task", "segment", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["task"] == "seg" and info["model"] == "yolo26n"
    assert info["params"] == 3_126_280  # the published yolo26n-seg layout, both branches and the semantic head
    assert 2.597e6 <= info["params_deploy"] <= 2.805e6  # the paper's 2.7 M (the deployed graph), rounding and +-2 %
    assert 8.50 <= info["gflops"] <= 9.50  # the paper's 9.0, rounding and +-5 %
    assert info["params_deploy"] < info["params"]


def test_summary_of_the_keypoint_task_needs_no_dataset() -> None:
    result = runner.invoke(app, ["summary", "--variant", "n", "--task", "keypoints", "--num-classes", "1", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["task"] == "keypoints"
    # the paper's pose n 2.9 M (17 points) is the deployed graph's, rounding and +-2 %
    assert 2.793e6 <= info["params_deploy"] <= 3.009e6 < info["params"]
    assert 7.08 <= info["gflops"] <= 7.93  # the paper's 7.5, rounding and +-5 %
