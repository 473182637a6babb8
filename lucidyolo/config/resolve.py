"""Resolve a run configuration: defaults < packaged presets < user files < CLI overrides.

Two-phase validation: ``model.task`` (or the CLI's TASK) picks the task plugin,
then the whole config is validated with the plugin's model for the ``model``
section. Cross-field rules come from the task's declared capabilities.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError, create_model

from lucidyolo.config.overrides import deep_merge
from lucidyolo.config.presets import load_config_source
from lucidyolo.config.schema import RunConfig
from lucidyolo.errors import ConfigError
from lucidyolo.tasks.api import TaskSpec

_MULTI_PROCESS_STRATEGIES = ("ddp", "fsdp", "deepspeed")


def run_config_class(spec: TaskSpec) -> type[RunConfig]:
    """``RunConfig`` whose ``model`` section is validated by the task's own model."""
    return create_model(  # type: ignore[call-overload, no-any-return]
        f"RunConfig_{spec.name}", __base__=RunConfig, model=(spec.config_model, ...)
    )


def _section_class(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    cls: type[BaseModel] | None = root
    for part in loc:
        if cls is None:
            return None
        field = cls.model_fields.get(str(part))
        ann = field.annotation if field is not None else None
        cls = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return cls


def _suggest(root: type[BaseModel], loc: tuple[Any, ...]) -> str | None:
    """A full dotted key close to the unknown one, in its own section first, then anywhere."""
    parent, key = loc[:-1], str(loc[-1])
    cls = _section_class(root, parent)
    if cls is not None:
        close = difflib.get_close_matches(key, list(cls.model_fields), n=1, cutoff=0.6)
        if close:
            return ".".join([*map(str, parent), close[0]])
    everywhere: dict[str, str] = {}
    for section, field in root.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            for name in ann.model_fields:
                everywhere.setdefault(name, f"{section}.{name}")
        else:
            everywhere.setdefault(section, section)
    close = difflib.get_close_matches(key, list(everywhere), n=1, cutoff=0.75)
    return everywhere[close[0]] if close else None


def format_validation_error(exc: ValidationError, root: type[BaseModel]) -> ConfigError:
    """One ConfigError listing every problem with its full dotted key."""
    lines: list[str] = []
    unknown = missing = False
    for err in exc.errors():
        loc = tuple(err["loc"])
        dotted = ".".join(map(str, loc)) or "<config>"
        if err["type"] == "extra_forbidden":
            hint = _suggest(root, loc)
            tail = f"; did you mean `{hint}`?" if hint else ""
            lines.append(f"`{dotted}` is not a known key{tail}")
            unknown = True
        elif err["type"] == "missing":
            lines.append(f"`{dotted}` is required and has no default")
            missing = True
        else:
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"`{dotted}` = {err.get('input')!r}: {msg}")
    what = "Invalid configuration: " + "; ".join(lines)
    what += "" if what.endswith("?") else "."
    if unknown:
        why = "every key is validated before any work starts, so a typo cannot silently train something else."
    elif missing:
        why = "these keys have no safe default: a guess would train against the wrong label or point space."
    else:
        why = "values are checked before any work starts."
    fix = "Correct the key or value (`lucid fit TASK --print-config` shows the resolved config)."
    if missing:
        fix = "Set the key with a dotted override (e.g. `--model.num_keypoints 17`) or use the task's preset."
    return ConfigError(what, why=why, fix=fix)


def _device_count(devices: int | str | list[int]) -> int | None:
    """Number of devices a Trainer would use, None for 'auto' (decided by the machine)."""
    if isinstance(devices, list):
        return len(devices)
    if isinstance(devices, int):
        return devices
    text = devices.strip()
    if text == "auto":
        return None
    if "," in text:
        return len([p for p in text.split(",") if p.strip()])
    try:
        return int(text)
    except ValueError as exc:
        raise ConfigError(
            f"`trainer.devices` = {devices!r} is not understood.",
            fix="Use an integer count, a list of indices, a comma-separated string or 'auto'.",
        ) from exc


def apply_cross_field_rules(cfg: RunConfig, spec: TaskSpec) -> RunConfig:
    """Refuse combinations the task cannot honour; returns the (possibly adjusted) config."""
    if not spec.capabilities.multi_device:
        why = (
            f"task {spec.name!r} declares multi_device=False: its epoch metric ranks every detection of the "
            "split together and is not gathered across ranks, so each rank would report a per-rank number "
            "that looks plausible and is wrong."
        )
        count = _device_count(cfg.trainer.devices)
        if count is None:
            cfg.trainer.devices = 1  # 'auto' would take every GPU of the machine
        elif count != 1:
            asks = "every device of the machine" if count == -1 else f"{count} devices"
            raise ConfigError(
                f"`trainer.devices` = {cfg.trainer.devices!r} asks for {asks}, but task "
                f"{spec.name!r} trains on exactly one.",
                why=why,
                fix="Set `--trainer.devices 1` (and a larger batch size if you want more throughput).",
            )
        strategy = cfg.trainer.strategy.lower()
        if any(s in strategy for s in _MULTI_PROCESS_STRATEGIES) or cfg.trainer.num_nodes != 1:
            raise ConfigError(
                f"`trainer.strategy` = {cfg.trainer.strategy!r} / `trainer.num_nodes` = "
                f"{cfg.trainer.num_nodes} starts several processes, but task {spec.name!r} trains in one.",
                why=why,
                fix="Use `--trainer.strategy auto --trainer.num_nodes 1`.",
            )
    return cfg


def resolve_config(
    spec: TaskSpec,
    configs: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
    data_root: Path | None = None,
    get_task: Any = None,
) -> RunConfig:
    """Merge and validate a run configuration for ``spec``.

    Args:
        spec: the task named on the command line.
        configs: preset names and/or file paths; presets are applied before files.
        overrides: nested CLI overrides (highest precedence).
        data_root: ``--data-root`` (same precedence as overrides).
        get_task: resolver for a ``model.task`` found in a config (defaults to the registry).

    Raises:
        ConfigError: unknown keys, bad values, a config for another task, a rule violation.
    """
    packages = (spec.presets_package,) if spec.presets_package else ()
    loaded = [load_config_source(name, packages) for name in configs or []]
    merged: dict[str, Any] = {}
    for data, _ in [x for x in loaded if x[1]] + [x for x in loaded if not x[1]]:
        merged = deep_merge(merged, data)
    merged = deep_merge(merged, overrides or {})
    if data_root is not None:
        merged = deep_merge(merged, {"data": {"data_root": str(data_root)}})

    model = merged.get("model", {})
    if model is not None and not isinstance(model, dict):
        raise ConfigError("The `model` section must be a mapping.", fix="Write `model:` followed by keys.")
    asked = (model or {}).get("task")
    if asked is not None:
        if get_task is None:
            from lucidyolo.tasks.registry import get_task
        other = get_task(str(asked))
        if other.name != spec.name:
            raise ConfigError(
                f"The configuration sets `model.task` = {asked!r}, but the command trains {spec.name!r}.",
                why="a config written for one task would silently change what another task trains.",
                fix=f"Use a config for {spec.name!r}, or run `lucid fit {other.name}`.",
            )
    merged = deep_merge(merged, {"model": {"task": spec.name}})

    cls = run_config_class(spec)
    try:
        cfg = cls.model_validate(merged)
    except ValidationError as exc:
        raise format_validation_error(exc, cls) from None
    return apply_cross_field_rules(cfg, spec)


def config_to_yaml(cfg: RunConfig) -> str:
    """The resolved config as YAML (paths as strings), the form written to ``config.yaml``."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
