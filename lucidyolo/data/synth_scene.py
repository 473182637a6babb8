"""A kind of synthetic scene: how one object is drawn and what its labels carry.

The synthetic set (:mod:`lucidyolo.data.synth`) owns the frame: background,
object placement, class hues, file layout. A :class:`SyntheticScene` owns what
differs between kinds of object: the class names, how one object is painted,
the numbers of its YOLO row and the keys its COCO annotation, categories and
``data.yaml`` add. The coloured shapes are the default scene; a field whose
task needs other objects names its task's scene in ``FieldSpec.synth``
(``"package.module:attribute"``, imported when a set is written).

Scenes write their labels themselves rather than through the fields' codecs
(:mod:`lucidyolo.structures.field_io`): the synthetic files keep the text they
were first written with (COCO numbers rounded to 0.01 px, outlines clipped to
the image, 6-decimal YOLO rows), on which the overfit gates were tuned.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lucidyolo.structures.fields import FieldSpec


@dataclass(frozen=True)
class Drawn:
    """One painted object.

    Attributes:
        label: class index.
        ring: ``(n, 2)`` float64 outline in pixels; it may leave the image
            (writers clip it to ``[0, S]``); its bounds are the object's box.
        points: ``(K, 2)`` float64 named points in pixels (a keypoint scene's),
            else ``None``.
    """

    label: int
    ring: np.ndarray
    points: np.ndarray | None = None


def clipped_ring(obj: Drawn, size: int) -> np.ndarray:
    """The outline clipped to an ``S x S`` image: ``(n, 2)`` float64 pixels."""
    return np.clip(obj.ring, 0, size)


def box_row(obj: Drawn, size: int) -> np.ndarray:
    """The normalised ``cx cy w h`` of the clipped outline's bounds: ``(4,)`` float64."""
    ring = clipped_ring(obj, size) / size
    lo, hi = ring.min(0), ring.max(0)
    return np.concatenate([(lo + hi) / 2, hi - lo])


def ring_row(obj: Drawn, size: int) -> np.ndarray:
    """The clipped outline, normalised: ``(2n,)`` float64 ``x1 y1 ... xn yn``."""
    return (clipped_ring(obj, size) / size).reshape(-1)


def no_keys(obj: Drawn, ring: np.ndarray) -> dict[str, Any]:
    return {}


Draw = Callable[..., Drawn]
"""``draw(canvas, rng, cx, cy, r, rot, label, colour, size) -> Drawn``."""


@dataclass(frozen=True)
class SyntheticScene:
    """What one kind of synthetic object looks like and how it is labelled.

    Attributes:
        names: class names; each object's label is drawn uniformly from
            ``range(len(names))`` and picks one of the four class hues (so at
            most four names).
        draw: ``draw(canvas, rng, cx, cy, r, rot, label, colour, size) -> Drawn``:
            paints one object of radius ``r`` px centred at ``(cx, cy)``, turned
            by ``rot`` radians, in ``colour`` (RGB ints) on ``canvas`` (a
            ``PIL.ImageDraw.ImageDraw`` of the ``S x S`` image, ``S = size``).
            It may draw more numbers from ``rng``; the order of those draws is
            part of the set's bytes.
        yolo_row: ``yolo_row(obj, size) -> (T,) float64``: the normalised
            numbers of its YOLO row after the class id.
        coco_keys: ``coco_keys(obj, ring) -> dict``: keys added to (or
            replacing) its COCO annotation; ``ring (n, 2)`` is the clipped
            outline in pixels.
        category_keys: keys every COCO category carries (keypoint names).
        yaml_lines: extra ``data.yaml`` lines (``kpt_shape``), before ``names:``.
    """

    names: Sequence[str]
    draw: Draw
    yolo_row: Callable[[Drawn, int], np.ndarray] = box_row
    coco_keys: Callable[[Drawn, np.ndarray], dict[str, Any]] = no_keys
    category_keys: Mapping[str, Any] = field(default_factory=dict)
    yaml_lines: tuple[str, ...] = ()


def scene_of(specs: Sequence[FieldSpec], default: SyntheticScene) -> SyntheticScene:
    """The scene named by the first field in ``specs`` with a ``synth`` rule, else ``default``."""
    target = next((s.synth for s in specs if s.synth), None)
    if target is None:
        return default
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"synth rule {target!r} must look like 'package.module:attribute'")
    scene = getattr(importlib.import_module(module), attr)
    if not isinstance(scene, SyntheticScene):
        raise TypeError(f"synth rule {target!r} is a {type(scene).__name__}, not a SyntheticScene")
    return scene
