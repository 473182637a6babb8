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
from lucidyolo.tasks.api import PLUGIN_API_VERSION, TASK_NAME_RE, TaskCapabilities, TaskSpec

_HOOKS = ("build_model", "build_criterion", "decode", "make_synthetic", "build_metric", "draw")


def task_spec_problems(spec: Any) -> list[str]:
    """Every way ``spec`` breaks the plugin contract (empty when it is fine)."""
    if not isinstance(spec, TaskSpec):
        return [f"expected a lucidyolo.tasks.api.TaskSpec, got {type(spec).__name__}"]
    problems = []
    if spec.api_version != PLUGIN_API_VERSION:
        problems.append(f"api_version {spec.api_version} != PLUGIN_API_VERSION {PLUGIN_API_VERSION}")
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
    elif not all(isinstance(k, str) for k in spec.capabilities.metric_keys):
        problems.append("capabilities.metric_keys must be strings")
    for hook in _HOOKS:
        value = getattr(spec, hook)
        if value is not None and not callable(value):
            problems.append(f"hook {hook} must be callable or None")
    return problems


def check_task_spec(spec: Any) -> None:
    """Raise ``AssertionError`` listing every contract violation of ``spec``."""
    problems = task_spec_problems(spec)
    if problems:
        raise AssertionError("TaskSpec contract violations:\n- " + "\n- ".join(problems))
