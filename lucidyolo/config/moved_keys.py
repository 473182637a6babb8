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
    if not isinstance(raw, Mapping) or not moved_keys(raw):
        return raw
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}
    section, key = MOVED_SECTION
    nested = out[section].pop(key, None) if isinstance(out.get(section), dict) else None
    pairs = [((sec, k), new) for (sec, k), new in MOVED.items()]
    if isinstance(nested, Mapping):
        out.setdefault(key, {})
        pairs += [((f"{section}.{key}", k), (key, k)) for k in nested]
    for (sec, k), (new_sec, new_key) in pairs:
        source = nested if sec == f"{section}.{key}" else out.get(sec)
        if not isinstance(source, Mapping) or k not in source:
            continue
        value = source[k] if source is nested else source.pop(k)  # type: ignore[union-attr]
        target = out.setdefault(new_sec, {})
        if not isinstance(target, dict):
            continue  # the new section is not a mapping: validation says so
        if new_key in target:
            raise ValueError(
                f"`{sec}.{k}` and `{new_sec}.{new_key}` are both set: `{sec}.{k}` is the pre-1.0 name of "
                f"`{new_sec}.{new_key}`; keep only `{new_sec}.{new_key}`"
            )
        target[new_key] = value
        if warn:
            warnings.warn(f"`{sec}.{k}` is now `{new_sec}.{new_key}` (the old key works until lucid 2.0; "
                          f"write `{new_sec}.{new_key}`)", MovedConfigKey, stacklevel=1)
    return out
