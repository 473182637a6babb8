"""``benchmarks/gpu_check.py`` on a machine without CUDA: its plumbing, and its CUDA checks run with the CPU in CUDA's place."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_check


def test_without_cuda_it_says_so_and_exits_0():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the script would run its checks")
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["benchmark"] == "gpu_check" and "no CUDA device" in report["skipped"]


def test_a_failing_check_is_recorded_and_the_others_still_run():
    results: dict = {}
    gpu_check.run_check(results, "boom", lambda: 1 / 0)
    gpu_check.run_check(results, "fine", lambda: {"value": 3})
    gpu_check.run_check(results, "refused", lambda: {"passed": False})
    assert results["boom"]["passed"] is False and "ZeroDivisionError" in results["boom"]["error"]
    assert results["fine"] == {"value": 3, "passed": True, "seconds": results["fine"]["seconds"]}
    assert results["refused"]["passed"] is False


def test_the_device_checks_pass_with_the_cpu_standing_in_for_cuda(tmp_path):
    """The same functions the GPU runs: the CPU against itself must agree exactly (a broken check would not)."""
    hsv = gpu_check.device_hsv("cpu")
    assert hsv["passed"] and hsv["max_abs_diff_of_255"] == 0.0
    obj = gpu_check.objective("det", tmp_path, "cpu")
    assert obj["passed"] and obj["loss_rel_diff"] == 0.0 and obj["grad_rel_diff"] == 0.0
    assert obj["loss_cpu"] > 0 and set(obj["terms_cpu"]) == set(obj["tf32_off"]["terms_cuda"])
    assert obj["nonfinite_grads_cpu"] == [] and obj["tf32_on"]["nonfinite_grads"] == []
