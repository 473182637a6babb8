"""Contract checks for plugin authors.

Run :func:`check_task_spec` in your plugin's own test suite::

    from lucidyolo.testing import check_task_spec
    from my_plugin.task import SPEC

    def test_spec_honours_the_contract():
        check_task_spec(SPEC)
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import (
    TASK_NAME_RE,
    ExportSpec,
    GateSpec,
    MetricSpec,
    TaskCapabilities,
    TaskSpec,
    api_version_problem,
)


def task_spec_problems(spec: Any) -> list[str]:
    """Every way ``spec`` breaks the plugin contract (empty when it is fine)."""
    if not isinstance(spec, TaskSpec):
        return [f"expected a lucidyolo.tasks.api.TaskSpec, got {type(spec).__name__}"]
    problems = []
    version = api_version_problem(spec.api_version)
    if version is not None and version[0] == "error":
        problems.append(version[1])
    for label in (spec.name, *spec.aliases):
        if not TASK_NAME_RE.match(label):
            problems.append(f"name or alias {label!r} must match {TASK_NAME_RE.pattern}")
    if spec.name in spec.aliases or len(set(spec.aliases)) != len(spec.aliases):
        problems.append("aliases must be unique and differ from the name")
    if not (isinstance(spec.config_model, type) and issubclass(spec.config_model, ModelConfig)):
        problems.append("config_model must subclass lucidyolo.config.schema.ModelConfig")
    else:
        if spec.config_model.model_config.get("extra") != "forbid":
            problems.append("config_model must keep extra='forbid' (unknown keys are errors)")
        try:
            spec.config_model.model_validate({"task": spec.name, "surely_not_a_key": 1})
            problems.append("config_model accepted an unknown key")
        except ValidationError:
            pass
    if not isinstance(spec.capabilities, TaskCapabilities):
        problems.append("capabilities must be a TaskCapabilities")
    problems += _metric_problems(spec)
    for hook in TaskSpec.HOOKS:
        value = getattr(spec, hook)
        if value is not None and not callable(value):
            problems.append(f"hook {hook} must be callable or None")
    if spec.gate is not None and not (isinstance(spec.gate, GateSpec) and callable(spec.gate.score)):
        problems.append("gate must be a GateSpec with a callable score")
    if spec.export is not None and not (isinstance(spec.export, ExportSpec) and spec.export.outputs):
        problems.append("export must be an ExportSpec naming at least one output")
    if not all(isinstance(f, str) for f in spec.fields):
        problems.append("fields must be strings")
    return problems


def _metric_problems(spec: TaskSpec) -> list[str]:
    m = spec.metrics
    if not isinstance(m, MetricSpec):
        return ["metrics must be a MetricSpec"]
    problems = []
    if not all(isinstance(k, str) and k.startswith("val/") for k in m.keys):
        problems.append("metrics.keys must be strings starting with 'val/'")
    if m.primary is not None and m.primary not in m.keys:
        problems.append(f"metrics.primary {m.primary!r} is not one of metrics.keys")
    unknown = set(m.columns) - set(m.keys)
    if unknown:
        problems.append(f"metrics.columns names keys that are not logged: {sorted(unknown)}")
    if spec.build_metric is not None and not m.keys:
        problems.append("a task with build_metric must declare metrics.keys")
    return problems


def check_task_spec(spec: Any) -> None:
    """Raise ``AssertionError`` listing every contract violation of ``spec``."""
    problems = task_spec_problems(spec)
    if problems:
        raise AssertionError("TaskSpec contract violations:\n- " + "\n- ".join(problems))
