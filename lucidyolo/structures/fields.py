"""Registered per-instance fields: declared once, with every rule the pipeline applies to them.

:class:`~lucidyolo.structures.targets.Targets` always carries the core
``boxes (N, 4)``, ``labels (N,)`` and ``difficult (N,)``. Every other
per-instance field (``polygons``, ``rboxes``, ``keypoints`` or a plugin's own)
is a :class:`FieldSpec` registered here: the :class:`Targets` attributes it
owns (with dtype and trailing shape), how it goes through the affine map of a
sample (a ``2 x 3`` matrix; the training pipeline's is isotropic scale +
translate), how it mirrors, how it is clipped to the visible region, whether
an instance survives a crop, how it reads from and writes to label files
(:mod:`lucidyolo.structures.field_io`), and the tensors it always packs into the batch transport
(a constant set per field, so a batch costs the same number of shared-memory
segments whatever it holds), how they become padded ``(B, M, ...)`` ground
truth on the device, and which synthetic scene stands for it (a lazy
reference: this package imports neither the data layer nor the tasks).
Containers, augmentation, collate and unpack loop over the present fields;
none of them names one.

Rules run in loader workers: they are module-level functions (they pickle)
and numpy only; ``unpack`` rules take torch tensors (imported lazily).
A field is declared through the ``lucidyolo.fields`` entry-point group (the
built-in ones by their tasks: ``lucidyolo/tasks/<task>/fields.py``) and imported
the first time any process asks for it, or registered with
:func:`register_field` when a plugin's module is imported (a worker re-imports
that module when it unpickles the plugin's hooks, so the registration is
present there too). Nothing here names a field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lucidyolo.structures.field_io import CocoRule, YoloRows
from lucidyolo.structures.polygons import Polygons

CORE_ATTRS = ("boxes", "labels", "difficult")
"""Attributes every :class:`Targets` has; fields may not claim them."""


@dataclass(frozen=True)
class AttrSpec:
    """One :class:`Targets` attribute owned by a field.

    Attributes:
        name: attribute name.
        dtype: numpy dtype of the array (ignored for ragged attributes).
        shape: trailing shape after the instance axis; ``None`` entries are
            read from the dataset meta (``meta_dims``) or left free.
        meta_dims: for each ``None`` in ``shape``, the dataset-meta key giving it
            (``num_keypoints``), used to build an empty value.
        ragged: the value is a :class:`Polygons` (ragged rings), not an array.
        per_image: an image-level target (a class label, a flag): the value has
            no instance axis (shape ``shape``), selecting instances keeps it, and
            joining several images' targets (mosaic, mixup) keeps the first
            (the main image's). ``fill`` is its value when unknown.
        fill: the empty value of a per-image attribute, and the value of every
            row when a reader does not provide the attribute (``fill_missing``).
        fill_missing: a reader that has no such notion (YOLO has no crowd
            regions) leaves the attribute out and it is filled with ``fill``.
        ignore_region: rows where this boolean attribute is True are ignore
            regions (COCO ``iscrowd``), not instances: they are not counted as
            instances and tasks keep them out of the assigner.
    """

    name: str
    dtype: Any = np.float32
    shape: tuple[int | None, ...] = ()
    meta_dims: tuple[str, ...] = ()
    ragged: bool = False
    per_image: bool = False
    fill: float = 0
    fill_missing: bool = False
    ignore_region: bool = False

    # ------------------------------------------------------------ container ops
    def coerce(self, value: Any) -> Any:
        if self.ragged:
            return value
        if self.per_image:
            return np.asarray(value, dtype=self.dtype).reshape(self.shape)
        arr = np.asarray(value, dtype=self.dtype)
        if None in self.shape:
            return arr if arr.ndim == 1 + len(self.shape) else arr.reshape(arr.shape[0], *(-1 if d is None else d for d in self.shape))
        return arr.reshape(-1, *self.shape)

    def trailing(self, meta: Mapping[str, Any]) -> tuple[int, ...]:
        """The trailing shape with each free size read from the dataset meta (``num_keypoints``)."""
        dims = iter(self.meta_dims)
        return tuple(int(meta[next(dims)]) if d is None else d for d in self.shape)

    def empty(self, meta: Mapping[str, Any]) -> Any:
        if self.ragged:
            return Polygons.empty()
        if self.per_image:
            return np.full(self.shape, self.fill, self.dtype)
        return np.zeros((0, *self.trailing(meta)), self.dtype)

    def filled(self, n: int, meta: Mapping[str, Any]) -> Any:
        """``n`` rows of ``fill`` (an attribute the reader did not provide)."""
        return np.full((n, *self.trailing(meta)), self.fill, self.dtype)

    def empty_like(self, value: Any) -> Any:
        if self.per_image:
            return value.copy()  # the image keeps its image-level target without instances
        return Polygons.empty() if self.ragged else value[:0].copy()

    def select(self, value: Any, keep: np.ndarray, n: int) -> Any:
        if self.per_image:
            return value.copy()
        return value.filter(keep, n) if self.ragged else value[keep]

    def slice(self, value: Any, start: int, stop: int) -> Any:
        if self.per_image:
            return value.copy()
        return value.slice_instances(start, stop) if self.ragged else value[start:stop].copy()

    def concat(self, values: Sequence[Any], sizes: Sequence[int]) -> Any:
        if self.per_image:
            return values[0].copy()  # the main image's (mosaic tile 0, mixup's first image)
        if self.ragged:
            return Polygons.concat(values, sizes)
        return np.concatenate(values, axis=0)

    def clone(self, value: Any) -> Any:
        return value.clone() if self.ragged else value.copy()

    def validate(self, value: Any, n: int) -> None:
        if self.ragged:
            value.validate(n)
            return
        if self.per_image:
            if value.shape != self.shape or value.dtype != np.dtype(self.dtype):
                raise ValueError(f"{self.name} is {value.shape} {value.dtype}, expected {self.shape} {np.dtype(self.dtype)}")
            return
        if value.shape[0] != n or value.ndim != 1 + len(self.shape) or any(
            d is not None and d != got for d, got in zip(self.shape, value.shape[1:], strict=True)
        ):
            want = (n, *("K" if d is None else d for d in self.shape))
            raise ValueError(f"{self.name} has shape {value.shape}, expected {want}")
        if value.dtype != np.dtype(self.dtype):
            raise ValueError(f"{self.name} has dtype {value.dtype}, expected {np.dtype(self.dtype)}")


Values = dict[str, Any]
"""A field's attributes of one image, by attribute name."""


def _always(meta: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class FieldSpec:
    """One per-instance field and every rule the pipeline applies to it.

    Attributes:
        name: what a task declares in ``TaskSpec.fields``.
        attrs: the :class:`Targets` attributes it owns (``keypoints`` owns
            ``keypoints`` and ``visibility``: they flip and clip together).
        packed: names of the tensors it always emits in a batch.
        pack: ``pack(values, counts) -> {packed name: ndarray}``: ``values``
            has one dict per image (attribute -> value, ``None`` where that
            image lacks it), ``counts (B,)`` instances per image.
        unpack: ``unpack(tensors, image_of, slot, batch, m) -> {gt key: Tensor}``:
            instance ``n`` goes to ``[image_of[n], slot[n]]`` of ``(B, M, ...)``.
        affine: ``affine(values, m) -> values`` under the ``2 x 3`` affine
            matrix ``m`` (float64; ``p' = m[:, :2] @ p + m[:, 2]``). The
            training pipeline's maps are isotropic scale + translate today; a
            rule that cannot follow a more general map (a rotated box under
            shear) raises ``ValueError``. ``None``: the field has no geometry.
        flip: ``flip(values, right, meta) -> values`` for ``x' = right - x``;
            ``meta`` is the dataset meta (``flip_idx``). ``None``: unchanged.
        can_flip: ``can_flip(meta)``; False disables flips for the whole
            dataset (a missing permutation must never corrupt labels).
        clip: ``clip(values, region) -> values`` for the visible region
            ``x0, y0, x1, y1`` (survival is decided on the boxes; this adjusts
            the field, e.g. zeroes the visibility of points outside).
        survive: ``survive(values, region) -> keep (N,) bool``: whether each
            instance survives a crop to ``region`` (its values are already in
            the output frame, not yet clipped). ``None``: the field has no say.
        survive_alone: ``survive`` replaces the engine's box rule (sides >= 2 px
            and >= 10% of the area kept) instead of being combined with it
            (logical and): a task whose instances have no boxes (points) sets it.
        yolo: how the field reads from and writes to one YOLO label row
            (:class:`~lucidyolo.structures.field_io.YoloRows`); ``None``: the
            field has no YOLO row rule.
        coco: how the field reads from and writes to a COCO annotation
            (:class:`~lucidyolo.structures.field_io.CocoRule`); ``None``: the
            COCO reader cannot fill it.
        dota: ``dota(corners) -> values``: the field from a DOTA row's four
            corners ``(N, 4, 2)`` float32 pixels (already clipped to the image);
            ``None``: the DOTA reader cannot fill it.
        cutout: ``cutout(values) -> rings``: the outline rings (``(n, 2)`` float pixels, at least 3
            points each) of the values' instances, through which copy-paste cuts a pasted
            instance's pixels out; ``None``: copy-paste does not fire for the field.
        guess_priority: when several fields read the same files (a DOTA row's four corners, a YOLO
            row of 8 numbers), ``lucid data check`` without ``--task`` guesses the one with the highest
            priority (fields load in no fixed order).
        meta_keys: dataset-meta keys the field needs (``num_keypoints``, ``flip_idx``);
            readers fill them (``YoloRows.meta``) and ``lucid fit`` saves them.
        synth: how the synthetic set draws and labels a task with this field:
            ``"package.module:attribute"`` of a
            :class:`~lucidyolo.data.synth_scene.SyntheticScene`, imported when
            a set is written (the first of a task's fields with one wins);
            ``None``: the field asks for no scene of its own (the default
            shapes, labelled by their boxes).
    """

    name: str
    attrs: tuple[AttrSpec, ...]
    packed: tuple[str, ...]
    pack: Callable[[Sequence[Values], np.ndarray], dict[str, np.ndarray]]
    unpack: Callable[..., dict[str, Any]]
    affine: Callable[[Values, np.ndarray], Values] | None = None
    flip: Callable[[Values, float, Mapping[str, Any]], Values] | None = None
    can_flip: Callable[[Mapping[str, Any]], bool] = _always
    clip: Callable[[Values, tuple[float, float, float, float]], Values] | None = None
    survive: Callable[[Values, tuple[float, float, float, float]], np.ndarray] | None = None
    survive_alone: bool = False
    yolo: YoloRows | None = None
    coco: CocoRule | None = None
    dota: Callable[[np.ndarray], Values] | None = None
    cutout: Callable[[Values], list[np.ndarray]] | None = None
    guess_priority: int = 0
    meta_keys: tuple[str, ...] = field(default=())
    synth: str | None = None

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)


_FIELDS: dict[str, FieldSpec] = {}
_ATTRS: dict[str, tuple[FieldSpec, AttrSpec]] = {}

FIELD_GROUP = "lucidyolo.fields"
"""The entry-point group that declares fields by name (``rboxes = "pkg.module:FIELD"``): a field is
imported the first time it is asked for, in any process (loader workers too). The built-in fields are
declared there by their tasks; a plugin may declare its own, or call :func:`register_field` at import."""

_declared_loaded = False
_declared_errors: dict[str, str] = {}


def _load_declared() -> None:
    """Import every field declared in :data:`FIELD_GROUP` (once per process; a broken one is remembered)."""
    global _declared_loaded
    if _declared_loaded:
        return
    _declared_loaded = True  # first: a field module imports this one
    from importlib.metadata import entry_points

    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=FIELD_GROUP):
        if (ep.name, ep.value) in seen:  # editable installs list an entry point twice
            continue
        seen.add((ep.name, ep.value))
        try:
            obj = ep.load()
        except Exception as exc:  # one broken plugin must not hide the other fields
            _declared_errors[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"
            continue
        if isinstance(obj, FieldSpec):
            register_field(obj)


def register_field(spec: FieldSpec) -> None:
    """Register a field (plugins call this when their hooks module is imported).

    Re-registering the same spec is a no-op; another spec under a taken field,
    attribute or packed-tensor name raises ``ValueError``.
    """
    old = _FIELDS.get(spec.name)
    if old == spec:
        return
    if old is not None:
        raise ValueError(f"instance field {spec.name!r} is already registered")
    taken_attrs = set(_ATTRS) | set(CORE_ATTRS)
    taken_packed = {p for f in _FIELDS.values() for p in f.packed} | {*CORE_ATTRS, "images", "counts", "meta"}
    for names, taken, what in ((spec.attr_names, taken_attrs, "attribute"), (spec.packed, taken_packed, "packed tensor")):
        clash = taken.intersection(names)
        if clash:
            raise ValueError(f"{what} name(s) {sorted(clash)} of field {spec.name!r} are taken")
    _FIELDS[spec.name] = spec
    for a in spec.attrs:
        _ATTRS[a.name] = (spec, a)


def _lookup(name: str) -> FieldSpec | None:
    return _FIELDS.get(name) or (_ATTRS[name][0] if name in _ATTRS else None)


def get_field(name: str) -> FieldSpec:
    """The spec of a field by its name (or by one of its attribute names), imported from its entry point if need be."""
    spec = _lookup(name)
    if spec is None:
        _load_declared()
        spec = _lookup(name)
    if spec is None:
        broken = f"; its declaration failed to load: {_declared_errors[name]}" if name in _declared_errors else ""
        raise KeyError(f"instance field {name!r} is not registered (known: {', '.join(sorted(_FIELDS))}){broken}")
    return spec


def registered_fields() -> tuple[FieldSpec, ...]:
    """Every field: the declared ones (imported now if need be) and those registered at import, in registration order."""
    _load_declared()
    return tuple(_FIELDS.values())


def field_specs(fields: Sequence[str | FieldSpec]) -> tuple[FieldSpec, ...]:
    """The specs of ``fields`` (names or specs) in order, each once (bind them when a pipeline is built, not per sample)."""
    out: list[FieldSpec] = []
    for name in fields:
        spec = name if isinstance(name, FieldSpec) else get_field(name)
        if spec not in out:
            out.append(spec)
    return tuple(out)


def _attr(name: str) -> tuple[FieldSpec, AttrSpec] | None:
    hit = _ATTRS.get(name)
    if hit is None and not _declared_loaded:
        _load_declared()
        hit = _ATTRS.get(name)
    return hit


def attr_spec(name: str) -> AttrSpec | None:
    """The registered attribute ``name``, or ``None``."""
    hit = _attr(name)
    return None if hit is None else hit[1]


def field_of_attr(name: str) -> FieldSpec | None:
    hit = _attr(name)
    return None if hit is None else hit[0]


def pad_rows(values: Any, image_of: Any, slot: Any, batch: int, m: int, fill: float | bool = 0) -> Any:
    """Scatter ``(N, ...)`` rows into a ``(B, M, ...)`` tensor filled with ``fill``."""
    import torch

    out = torch.full((batch, m, *values.shape[1:]), fill, dtype=values.dtype, device=values.device)
    out[image_of, slot] = values
    return out
