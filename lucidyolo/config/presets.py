"""Packaged presets (shipped in the wheel, each in its task's package) and user config files."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from lucidyolo.errors import ConfigError


def _preset_dir(package: str) -> Any:
    return resources.files(package).joinpath("presets")


def preset_names(packages: Sequence[str] = ()) -> list[str]:
    """File names of the presets of ``packages`` (a task's ``presets_package``), e.g. ``det_nano_smoke.yaml``."""
    names: set[str] = set()
    for package in packages:
        folder = _preset_dir(package)
        if folder.is_dir():
            names.update(p.name for p in folder.iterdir() if p.name.endswith(".yaml"))
    return sorted(names)


def _run_keys() -> tuple[str, ...]:
    """The run config's top-level keys, sections first, as the schema declares them."""
    from lucidyolo.config.schema import RunConfig

    return (*RunConfig.section_names(), *sorted(RunConfig.top_level_keys()))


def _read_yaml(text: str, origin: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"Config {origin} is not valid YAML: {exc}", fix="Fix the YAML syntax.") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"Config {origin} holds a {type(data).__name__}, not a mapping.",
            fix=f"A config file is a mapping with the keys {', '.join(_run_keys())}.",
        )
    return data


def is_preset_name(name: str) -> bool:
    """A bare file name (no folder part) that does not exist on disk is looked up among presets."""
    return Path(name).name == name and not Path(name).exists()


def load_config_source(name: str, packages: Sequence[str] = ()) -> tuple[dict[str, Any], bool]:
    """Read a preset by bare name (among those of ``packages``) or a user file by path.

    Returns:
        the mapping and whether it came from a packaged preset.
    """
    if is_preset_name(name):
        names = preset_names(packages)
        candidates = [name, f"{name}.yaml"]
        for cand in candidates:
            for package in packages:
                path = _preset_dir(package).joinpath(cand)
                if path.is_file():
                    return _read_yaml(path.read_text(), f"preset {cand}"), True
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"Config {name!r} is neither a file nor a packaged preset.{hint}",
            why=f"packaged presets are: {', '.join(names)}.",
            fix="Give a packaged preset name or a path to a YAML file.",
        )
    path = Path(name)
    if not path.is_file():
        raise ConfigError(f"Config file {path} does not exist.", fix="Check the path passed to --config.")
    return _read_yaml(path.read_text(), f"file {path}"), False
