"""Dotted command-line overrides: ``--data.batch_size 32``, ``--data.batch_size=32`` and ``data.batch_size=32``.

The run's top-level keys (``--seed 3``) are the one exception to the dot.

Values are parsed with ``yaml.safe_load`` so ``32`` is an int, ``true`` a bool,
``[0, 1]`` a list and ``null`` None.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
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


@cache
def top_level_keys() -> frozenset[str]:
    """The run config's keys outside every section (``--seed 3``, ``seed=3``), read from the schema.

    Imported on first use: the schema (pydantic) stays out of ``lucid --help``.
    """
    from lucidyolo.config.schema import RunConfig

    return RunConfig.top_level_keys()


def _check_key(key: str, token: str, value: str | None, options: Collection[str], command: str) -> str:
    """``key`` when it is a dotted key (or a top-level one); else a ConfigError, with a did-you-mean when one fits.

    ``value`` is the text that follows (for the example in the fix); ``options`` are the command's own long options,
    so a typo of one (``--data-roo``) is answered with it. Words other trainers use (``epochs=2``, ``--imgsz``)
    come from :data:`lucidyolo.config.habits.HABITS`.
    """
    if key in top_level_keys():
        return key
    if "." in key and all(part for part in key.split(".")):
        return key
    from lucidyolo.config.habits import suggest

    hint = suggest(key, options, value=value) if key else None
    if hint is not None:
        what = f"Unknown argument {token!r}; did you mean `{hint.spelling}`?"
        if hint.habit:
            why = f"`{key}` is another trainer's word; here {hint.why}"
        else:
            why = hint.why or "it is not an option of this command."
        raise ConfigError(what, why=why, fix=f"Write {hint.example(value)}. Run `{command} --help` for the options.")
    raise ConfigError(
        f"Unexpected argument {token!r}.",
        why="configuration overrides name a dotted key such as `data.batch_size`.",
        fix=_FIX + f" Run `{command} --help` for the other options.",
    )


def parse_overrides(args: list[str], options: Collection[str] = (), command: str = "lucid fit") -> dict[str, Any]:
    """Turn leftover CLI tokens into a nested dict.

    Args:
        args: tokens in command-line order.
        options: the command's own long options (``--data-root``, ``--config``...), named in the did-you-mean
            of a mistyped one.
        command: the command, as a user types it, for the `--help` pointer in errors.

    Returns:
        nested mapping, e.g. ``{"data": {"batch_size": 32}}``.

    Raises:
        ConfigError: a token is not an override or a value is missing; a word of another trainer
            (``epochs=2``) or a typo of an option names ours.
    """
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith("--"):
            body = token[2:]
            if "=" in body:
                key, text = body.split("=", 1)
                key = _check_key(key, token, text, options, command)
            else:
                key = body
                nxt = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
                key = _check_key(key, token, nxt, options, command)
                if nxt is None:
                    raise ConfigError(f"The override `--{key}` has no value.", fix=_FIX)
                i += 1
                text = nxt
        elif "=" in token:
            key, text = token.split("=", 1)
            key = _check_key(key, token, text, options, command)
        else:
            raise ConfigError(
                f"Unexpected argument {token!r}.",
                why="only one TASK argument is accepted; everything else must be an option or a dotted override.",
                fix=_FIX,
            )
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
