"""Dotted command-line overrides: ``--data.batch_size 32``, ``--data.batch_size=32`` and ``data.batch_size=32``.

The run's top-level keys (``--seed 3``) are the one exception to the dot.

Values are parsed with ``yaml.safe_load`` so ``32`` is an int, ``true`` a bool,
``[0, 1]`` a list and ``null`` None.
"""

from __future__ import annotations

from typing import Any

import yaml

from lucidyolo.errors import ConfigError

_FIX = "Write overrides as `--section.key value`, `--section.key=value` or `section.key=value`."


VERBATIM_KEYS = frozenset({"model.weights", "model.weights_sha256"})
"""Keys whose value is kept as typed: a digest of digits is not a number, nor a file named ``1e5`` a float."""


def _parse_value(key: str, text: str) -> Any:
    if key in VERBATIM_KEYS:
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"The value {text!r} given for `{key}` is not valid YAML ({exc}).", fix=_FIX) from exc


TOP_LEVEL_KEYS = frozenset({"seed"})
"""The run config's keys outside every section (``--seed 3``, ``seed=3``)."""


def _check_key(key: str, token: str) -> str:
    if key in TOP_LEVEL_KEYS:
        return key
    if "." not in key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"Unexpected argument {token!r}.",
            why="configuration overrides name a dotted key such as `data.batch_size`.",
            fix=_FIX + " Run `lucid fit --help` for the other options.",
        )
    return key


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """Turn leftover CLI tokens into a nested dict.

    Args:
        args: tokens in command-line order.

    Returns:
        nested mapping, e.g. ``{"data": {"batch_size": 32}}``.

    Raises:
        ConfigError: a token is not an override or a value is missing.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith("--"):
            body = token[2:]
            if "=" in body:
                key, text = body.split("=", 1)
            else:
                key = body
                if i + 1 >= len(args) or args[i + 1].startswith("--"):
                    raise ConfigError(f"The override `--{key}` has no value.", fix=_FIX)
                i += 1
                text = args[i]
        elif "=" in token:
            key, text = token.split("=", 1)
        else:
            raise ConfigError(
                f"Unexpected argument {token!r}.",
                why="only one TASK argument is accepted; everything else must be an option or a dotted override.",
                fix=_FIX,
            )
        key = _check_key(key, token)
        set_dotted(out, key, _parse_value(key, text))
        i += 1
    return out


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set ``tree[a][b][c] = value`` for ``key = "a.b.c"``, creating mappings on the way."""
    node = tree
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"`{key}` sets a key inside `{part}`, which is not a section.", fix=_FIX)
        node = nxt
    node[parts[-1]] = value


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """A new dict with ``top`` merged over ``base``; nested mappings merge, everything else replaces."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
