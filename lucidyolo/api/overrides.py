"""Config overrides as Python keyword arguments, turned into the nested dict ``resolve_config`` merges.

Three spellings, freely mixed, all meaning ``--trainer.max_epochs 2`` on the command line::

    model.fit(trainer={"max_epochs": 2})          # a section as a dict
    model.fit(trainer__max_epochs=2)              # section__key (a valid Python name)
    model.fit(**{"trainer.max_epochs": 2})        # the CLI's dotted key

Values are Python values, not YAML text (``2``, ``True``, ``None``, ``[0, 1]``).
Keys are not checked here: ``resolve_config`` validates the merged config and
answers an unknown key with a :class:`~lucidyolo.errors.ConfigError` naming the
closest known one, exactly as ``lucid fit`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucidyolo.config.overrides import set_dotted
from lucidyolo.errors import ConfigError


def dotted_key(key: str) -> str:
    """``"trainer__max_epochs"`` and ``"trainer.max_epochs"`` -> ``"trainer.max_epochs"``; a bare key unchanged."""
    if not key or any(not part for part in key.replace("__", ".").split(".")):
        raise ConfigError(
            f"The override key {key!r} is malformed.",
            why="an override names a config key: `section.key` (or `section__key` as a keyword argument).",
            fix="Write e.g. `trainer__max_epochs=2`, `**{'trainer.max_epochs': 2}` or `trainer={'max_epochs': 2}`.",
        )
    return key.replace("__", ".")


def nest_overrides(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Merge override mappings (later layers win) into one nested dict.

    Each key is a section (``"trainer"`` with a dict value), a dotted key
    (``"trainer.max_epochs"``), a double-underscore key (``"trainer__max_epochs"``)
    or a top-level key (``"seed"``); dict values are walked, so nested keys may be
    dotted too (``model={"weights": ...}``).

    Raises:
        ConfigError: an empty or malformed key (``"trainer."``, ``"__x"``), a key inside a plain value
            (``seed=1`` with ``seed__x=2``).
    """
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in _leaves(layer, ""):
            set_dotted(out, key, value)
    return out


def _leaves(tree: Mapping[str, Any], prefix: str) -> list[tuple[str, Any]]:
    """``(dotted key, value)`` for every non-mapping value of ``tree``, keys normalised."""
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        dotted = prefix + dotted_key(str(key))
        if isinstance(value, Mapping):
            out += _leaves(value, dotted + ".")
        else:
            out.append((dotted, value))
    return out
