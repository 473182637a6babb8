"""Config keys that moved to another section in 1.0, still read from their old place until 2.0.

1.0 groups the config by concern: ``optim`` (optimizer, learning rate and its
schedule, warmup), ``ema``, ``augment`` (strengths, mosaic and its last epochs),
``model`` (architecture, loss gains, weights to start from), ``data`` and
``trainer``. A config written before (a file, a dotted override, a run's
``config.yaml``, a checkpoint) still resolves: each old key is moved to its new
place with one warning line naming the new key. A source that sets both the old
and the new key is refused (which one it meant is not knowable).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

MOVED: dict[tuple[str, str], tuple[str, str]] = {
    **{("model", k): ("optim", k) for k in (
        "lr", "lr_reference_batch", "lr_scaling", "lrf", "momentum", "weight_decay", "warmup_epochs", "optimizer",
        "newton_schulz_dtype")},
    ("model", "ema"): ("ema", "enabled"),
    ("model", "ema_decay"): ("ema", "decay"),
    ("model", "ema_tau"): ("ema", "tau"),
    ("model", "close_mosaic"): ("augment", "close_mosaic"),
    ("data", "mosaic"): ("augment", "use_mosaic"),
}
"""``(section, key)`` before 1.0 -> ``(section, key)`` since; ``data.augment.<key>`` is ``augment.<key>``."""

MOVED_SECTION = ("data", "augment")
"""A whole section that moved: its keys are now those of the top-level ``augment`` section."""


class MovedConfigKey(UserWarning):
    """A config key written at its place before 1.0 (it still works until 2.0)."""


def moved_keys(raw: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``[(old dotted key, new dotted key)]`` of the old keys ``raw`` (a nested config mapping) sets."""
    found = []
    for (section, key), (new_section, new_key) in MOVED.items():
        part = raw.get(section)
        if isinstance(part, Mapping) and key in part:
            found.append((f"{section}.{key}", f"{new_section}.{new_key}"))
    section, key = MOVED_SECTION
    nested = raw.get(section, {}).get(key) if isinstance(raw.get(section), Mapping) else None
    if isinstance(nested, Mapping):
        found += [(f"{section}.{key}.{k}", f"{key}.{k}") for k in nested]
    return found


def move_keys(raw: Any, warn: bool = True) -> Any:
    """``raw`` (one config source, nested) with every pre-1.0 key at its new place; anything else as it is.

    Raises:
        ValueError: a source sets a key at both its old and its new place.
    """
    found = moved_keys(raw) if isinstance(raw, Mapping) else []
    if not found:
        return raw
    out = _copied(raw)
    for old, new in found:
        *old_path, old_key = old.split(".")
        new_section, new_key = new.split(".")
        source = out
        for part in old_path:
            source = source[part]
        value = source.pop(old_key)
        target = out.setdefault(new_section, {})
        if not isinstance(target, dict):
            continue  # the new section is not a mapping: validation says so
        if new_key in target:
            raise ValueError(f"`{old}` and `{new}` are both set: `{old}` is the pre-1.0 name of `{new}`; "
                             f"keep only `{new}`")
        target[new_key] = value
        if warn:
            warnings.warn(f"`{old}` is now `{new}` (the old key works until lucid 2.0; write `{new}`)",
                          MovedConfigKey, stacklevel=1)
    section, key = MOVED_SECTION
    if isinstance(out.get(section), dict) and out[section].get(key) == {}:
        del out[section][key]  # every key of the old section moved
    return out


def _copied(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a nested mapping (its mappings copied, its values shared)."""
    return {k: _copied(v) if isinstance(v, Mapping) else v for k, v in tree.items()}
