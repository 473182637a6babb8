"""Registered per-instance fields: how each one is packed into the batch transport and unpacked on the device.

Every instance field beyond the core ``boxes``, ``labels`` and ``difficult`` is
declared once here (or by a plugin through :func:`register_field`): the packed
tensors it always emits (a constant set, so a batch costs the same number of
shared-memory segments whatever its content), how those are built from the
per-image :class:`~lucidyolo.structures.targets.Targets` and how they become
padded ``(B, M, ...)`` ground truth after the transfer. The collate and unpack
code loop over a task's field list; neither names a field.

Pack functions are numpy-only (they run in loader workers); unpack functions
take torch tensors (they run on the device).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PackRule:
    """The transport rule of one instance field.

    Attributes:
        name: the field a task declares (``TaskSpec.fields``).
        reads: the :class:`Targets` attributes it packs (``keypoints`` packs
            ``keypoints`` and ``visibility``).
        packed: names of the tensors it always emits (batch-unique).
        pack: ``pack(values, counts) -> {packed name: ndarray}``; ``values`` has
            one tuple per image, the ``reads`` attributes of that image's targets
            (``None`` entries where it lacks them); ``counts (B,)`` instances per image.
        unpack: ``unpack(tensors, image_of, slot, batch, m) -> {gt key: Tensor}``;
            ``image_of (N,)`` and ``slot (N,)`` place instance ``n`` at
            ``[image_of[n], slot[n]]`` of a ``(B, M, ...)`` padded tensor.
    """

    name: str
    reads: tuple[str, ...]
    packed: tuple[str, ...]
    pack: Callable[[Sequence[Any], np.ndarray], dict[str, np.ndarray]]
    unpack: Callable[..., dict[str, Any]]


_RULES: dict[str, PackRule] = {}


def register_field(rule: PackRule) -> None:
    """Register a field's transport rule (plugins call this at import of their hooks module).

    Re-registering the same rule object is a no-op; another rule under a taken
    name or packed tensor name raises ``ValueError``.
    """
    old = _RULES.get(rule.name)
    if old is rule:
        return
    if old is not None:
        raise ValueError(f"instance field {rule.name!r} is already registered")
    taken = {p for r in _RULES.values() for p in r.packed} | {"images", "counts", "boxes", "labels", "difficult", "meta"}
    clash = taken.intersection(rule.packed)
    if clash:
        raise ValueError(f"packed tensor name(s) {sorted(clash)} of field {rule.name!r} are taken")
    _RULES[rule.name] = rule


def pack_rules(fields: Sequence[str]) -> tuple[PackRule, ...]:
    """The rules of ``fields`` in order (bind them once per loader, not per sample).

    Fields that share a rule (``keypoints`` + ``visibility``) resolve to it once.
    """
    out: list[PackRule] = []
    for name in fields:
        rule = _RULES.get(name) or next((r for r in _RULES.values() if name in r.reads), None)
        if rule is None:
            raise KeyError(f"instance field {name!r} is not registered (known: {', '.join(sorted(_RULES))})")
        if rule not in out:
            out.append(rule)
    return tuple(out)


def pad_rows(values: Any, image_of: Any, slot: Any, batch: int, m: int, fill: float | bool = 0) -> Any:
    """Scatter ``(N, ...)`` rows into a ``(B, M, ...)`` tensor filled with ``fill``."""
    import torch

    out = torch.full((batch, m, *values.shape[1:]), fill, dtype=values.dtype, device=values.device)
    out[image_of, slot] = values
    return out


# ------------------------------------------------------------------ built-in fields
def _pack_rboxes(values: Sequence[Any], counts: np.ndarray) -> dict[str, np.ndarray]:
    rows = [np.zeros((int(c), 5), np.float32) if v[0] is None else v[0] for v, c in zip(values, counts, strict=True)]
    return {"rboxes": np.concatenate(rows or [np.zeros((0, 5), np.float32)]).astype(np.float32).reshape(-1, 5)}


def _unpack_rboxes(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {"rboxes": pad_rows(t["rboxes"], image_of, slot, batch, m)}


def _pack_keypoints(values: Sequence[Any], counts: np.ndarray) -> dict[str, np.ndarray]:
    """``values`` are ``(keypoints (n, K, 2), visibility (n, K))`` pairs."""
    k = next((v[0].shape[1] for v in values if v[0] is not None), 0)
    kp = [np.zeros((int(c), k, 2), np.float32) if v[0] is None else v[0] for v, c in zip(values, counts, strict=True)]
    vis = [np.zeros((int(c), k), np.float32) if v[1] is None else v[1] for v, c in zip(values, counts, strict=True)]
    return {
        "keypoints": np.concatenate(kp or [np.zeros((0, k, 2), np.float32)]).astype(np.float32).reshape(-1, k, 2),
        "visibility": np.concatenate(vis or [np.zeros((0, k), np.float32)]).astype(np.float32).reshape(-1, k),
    }


def _unpack_keypoints(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {
        "keypoints": pad_rows(t["keypoints"], image_of, slot, batch, m),
        "visibility": pad_rows(t["visibility"], image_of, slot, batch, m),
    }


def _pack_polygons(values: Sequence[Any], counts: np.ndarray) -> dict[str, np.ndarray]:
    """Rings stay ragged: points, ring lengths and a batch-global owner index (never dense masks)."""
    shift = np.concatenate([[0], np.cumsum(counts)])[:-1]
    polys = [(v[0], s) for v, s in zip(values, shift, strict=True) if v[0] is not None]
    return {
        "poly_points": np.concatenate([p.points for p, _ in polys] or [np.zeros((0, 2), np.float32)]).astype(np.float32).reshape(-1, 2),
        "poly_ring_lengths": np.concatenate([p.ring_lengths() for p, _ in polys] or [np.zeros(0, np.int64)]).astype(np.int64),
        "poly_ring_owner": np.concatenate([p.ring_owner + s for p, s in polys] or [np.zeros(0, np.int64)]).astype(np.int64),
    }


def _unpack_polygons(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    owner = t["poly_ring_owner"]
    n = image_of.shape[0]
    return {
        "poly_points": t["poly_points"],
        "poly_ring_lengths": t["poly_ring_lengths"],
        "poly_ring_image": image_of[owner] if n else owner,
        "poly_ring_slot": slot[owner] if n else owner,
    }


register_field(PackRule("rboxes", ("rboxes",), ("rboxes",), _pack_rboxes, _unpack_rboxes))
register_field(PackRule(
    "keypoints", ("keypoints", "visibility"), ("keypoints", "visibility"), _pack_keypoints, _unpack_keypoints
))
register_field(PackRule(
    "polygons", ("polygons",), ("poly_points", "poly_ring_lengths", "poly_ring_owner"), _pack_polygons,
    _unpack_polygons,
))
