"""Resolve a run configuration: defaults < packaged presets < user files < CLI overrides.

Two-phase validation: ``model.task`` (or the CLI's TASK) picks the task plugin,
then the whole config is validated by the task's run config class
(``TaskSpec.run_config``: the plugin's model for the ``model`` section, and the
rules between fields as the schema's validators). This module does not import
the task layer: the caller hands the spec in.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ValidationError

from lucidyolo.config.moved_keys import move_keys
from lucidyolo.config.overrides import deep_merge
from lucidyolo.config.presets import load_config_source
from lucidyolo.config.schema import RULE_ERROR, RunConfig
from lucidyolo.errors import ConfigError


class TaskConfigSource(Protocol):
    """What resolution reads of a task (a ``TaskSpec`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...

    @property
    def presets_package(self) -> str | None: ...

    @property
    def run_config(self) -> type[RunConfig]: ...


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
    """One ConfigError listing every problem with its full dotted key.

    A broken rule between fields (:func:`lucidyolo.config.schema.rule_error`) is its own
    ConfigError with the rule's what, why and fix: an after-validator runs only once every
    field is valid, so it never comes with other errors.
    """
    for err in exc.errors():
        if err["type"] == RULE_ERROR:
            ctx = err.get("ctx") or {}
            return ConfigError(str(ctx["what"]), why=str(ctx["why"]), fix=str(ctx["fix"]))
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


def validate_config(spec: TaskConfigSource, config: Mapping[str, Any] | RunConfig, trains: bool = True) -> RunConfig:
    """``config`` validated by the task's run config class, pydantic's errors as one ConfigError.

    Args:
        spec: the task.
        config: a merged mapping (a resolved config, a checkpoint's, ``config.yaml``'s) or a config
            object built in Python (validated again: an assignment to a nested section is not checked
            against the rules between sections).
        trains: False for a config that will not train (a checkpoint restored for eval, predict or
            export): the single-process rule then brings it to one device instead of refusing it.

    Raises:
        ConfigError: an unknown key, a bad value, a broken rule.
    """
    cls = spec.run_config
    raw = config.model_dump() if isinstance(config, RunConfig) else config
    try:
        return cls.model_validate(raw, context={"trains": trains})
    except ValidationError as exc:
        raise format_validation_error(exc, cls) from None


def _moved(source: dict[str, Any]) -> dict[str, Any]:
    try:
        return move_keys(source)  # type: ignore[no-any-return]
    except ValueError as exc:
        raise ConfigError(f"{exc}.", why="since 1.0 the config is grouped by concern (optim, ema, augment, ...).",
                          fix="Write each key once, at its new place (`lucid fit TASK --print-config` shows them).") from None


def resolve_config(
    spec: TaskConfigSource,
    configs: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
    data_root: Path | None = None,
    get_task: Any = None,
    other_presets: Sequence[str] = (),
) -> RunConfig:
    """Merge and validate a run configuration for ``spec``.

    Args:
        spec: the task named on the command line.
        configs: preset names and/or file paths; presets are applied before files.
        overrides: nested CLI overrides (highest precedence).
        data_root: ``--data-root`` (same precedence as overrides).
        get_task: resolver (the registry's ``get_task``) for a ``model.task`` found in a config that is
            neither the task's name nor an alias, to name that task in the error; without it the name is
            quoted as written.
        other_presets: the other tasks' preset packages, searched after the task's own: a preset written
            for another task is then found and refused by its ``model.task``, naming that task.

    Raises:
        ConfigError: unknown keys, bad values, a config for another task, a rule violation.
    """
    own = (spec.presets_package,) if spec.presets_package else ()
    packages = (*own, *(p for p in other_presets if p not in own))
    loaded = [load_config_source(name, packages) for name in configs or []]
    merged: dict[str, Any] = {}
    # each source's pre-1.0 keys move to their sections before the merge (a warning names each), so an old
    # key on the command line still wins over the new key in a preset
    for data, _ in [x for x in loaded if x[1]] + [x for x in loaded if not x[1]]:
        merged = deep_merge(merged, _moved(data))
    merged = deep_merge(merged, _moved(overrides or {}))
    if data_root is not None:
        merged = deep_merge(merged, {"data": {"data_root": str(data_root)}})

    model = merged.get("model", {})
    if model is not None and not isinstance(model, dict):
        raise ConfigError("The `model` section must be a mapping.", fix="Write `model:` followed by keys.")
    asked = (model or {}).get("task")
    if asked is not None and str(asked) not in (spec.name, *spec.aliases):
        other = get_task(str(asked)).name if get_task is not None else str(asked)
        raise ConfigError(
            f"The configuration sets `model.task` = {asked!r}, but the command trains {spec.name!r}.",
            why="a config written for one task would silently change what another task trains.",
            fix=f"Use a config for {spec.name!r}, or run `lucid fit {other}`.",
        )
    merged = deep_merge(merged, {"model": {"task": spec.name}})
    return validate_config(spec, merged)


def config_to_yaml(cfg: RunConfig) -> str:
    """The resolved config as YAML (paths as strings), the form written to ``config.yaml``."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
