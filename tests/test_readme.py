"""The README stays a front door that matches the code: its commands are CI's, its lists are the package's.

Fast: reads files and the task registry (torch-free), runs nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _code_blocks(text: str) -> list[list[str]]:
    blocks = re.findall(r"```(?:bash|python)?\n(.*?)```", text, flags=re.S)
    return [[ln for ln in b.splitlines() if ln.strip()] for b in blocks]


def _section(title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, flags=re.S | re.M)
    assert found, f"README has no '## {title}' section"
    return found.group(1)


def test_first_code_block_is_the_set_up_test_and_main_job_that_ci_runs():
    set_up, test, main_job = _code_blocks(README)[0]
    ci_lines = [ln.strip() for ln in CI.splitlines()]
    # CI installs quietly (-q); otherwise it is the README's line, character for character.
    assert set_up.replace("pip install -c", "pip install -q -c") in ci_lines
    assert any(ln.startswith(test) for ln in ci_lines), f"CI does not run {test!r}"
    assert main_job == ".venv/bin/lucid fit det"
    assert README.index(set_up) < README.index("## Train on your own data")


def test_no_dated_measurements_or_machine_history():
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", README), "dates belong in CHANGELOG / git, not the README"
    # Figures live in docs/benchmarks.md: no throughput, GFLOP/s or wall-time figures here.
    assert not re.search(r"\d\s*(img/s|GFLOP/s)|\b\d+(\.\d+)? s wall", README)
    assert len(README.splitlines()) <= 200


def test_quick_start_for_own_data_comes_first_after_set_up():
    headings = re.findall(r"^## (.+)$", README, flags=re.M)
    assert headings[:3] == ["Set up, test, train", "Train on your own data", "Tasks"]


def test_preset_list_is_the_packaged_presets():
    packaged = sorted(p.name for p in (ROOT / "lucidyolo" / "tasks").glob("*/presets/*.yaml"))
    listed = sorted(set(re.findall(r"`([a-z_]+\.yaml)`", _section("Tasks"))))
    assert listed == packaged


def test_task_table_names_every_registered_task_with_its_aliases():
    from lucidyolo.tasks.registry import get_task, task_names

    rows = [r for r in _section("Tasks").splitlines() if r.startswith("|") and not r.startswith("|---")][1:]
    table: dict[str, set[str]] = {}
    for row in rows:
        cell = row.split("|")[2]
        names = re.findall(r"`([a-z_-]+)`", cell)
        table[names[0]] = set(names[1:])
    builtin = {"det", "seg", "obb", "keypoints"}
    registered = set(task_names())
    assert builtin <= registered
    for name in registered:
        if name not in table:
            pytest.fail(f"task {name!r} is registered but missing from the README's task table")
        assert table[name] == set(get_task(name).aliases), name
    # A row for a task that is not installed is allowed only for the first-party plugin.
    assert set(table) - registered <= {"cls"}


def test_every_relative_link_points_at_a_file():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_gate_floors_in_the_task_table_are_the_specs():
    from lucidyolo.tasks.registry import get_task

    for row in _section("Tasks").splitlines():
        names = re.findall(r"^\| [^|]+ \| `([a-z_]+)`", row)
        if not names:
            continue
        spec = get_task(names[0]) if names[0] in _registered() else None
        floor = re.search(r">= ([0-9.]+)", row.split("|")[-2])
        if spec is None or spec.gate is None:
            assert floor is None
        else:
            assert floor is not None and float(floor.group(1)) == spec.gate.floor, row


def _registered() -> set[str]:
    from lucidyolo.tasks.registry import task_names

    return set(task_names())


def test_benchmarks_page_is_one_table_whose_rows_name_a_command_and_a_defined_machine():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", page), "history belongs in git and the CHANGELOG"
    tables = [t for t in re.split(r"\n\s*\n", page) if t.lstrip().startswith("|")]
    machines_table, figures = tables  # the machines, then the one table of figures
    machines = {}
    for row in machines_table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert re.search(r"\d+ cores", cells[2]) and re.search(r"\d+ GFLOP/s", cells[3]), row
        machines[cells[0]] = cells
    rows = figures.splitlines()[2:]
    assert len(rows) >= 10
    for row in rows:
        what, command, result, machine = (c.strip() for c in row.strip("|").split("|"))
        assert machine in machines or machine == "any", row  # "any": counts (params, FLOPs), not timings
        script = re.match(r"`python (benchmarks/\w+\.py)", command)
        assert script or command.startswith("`lucid "), row
        if script:
            assert (ROOT / script.group(1)).is_file(), row
        assert re.search(r"\d", result), row
