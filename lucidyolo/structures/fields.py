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
Plugins register their fields at import of their hooks module with
:func:`register_field`; a worker re-imports that module when it unpickles the
plugin's hooks, so the registration is present there too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lucidyolo.structures.coco_annotations import CROWD_COCO, POLYGON_COCO, POSE_COCO, RBOX_COCO
from lucidyolo.structures.field_io import CocoRule, YoloRows
from lucidyolo.structures.geometry import (
    affine_points,
    canonicalize_rboxes,
    corners_to_polygons,
    corners_to_rbox,
    hflip_rboxes,
    similarity_of,
)
from lucidyolo.structures.polygons import Polygons
from lucidyolo.structures.yolo_rows import POLYGON_ROWS, POSE_ROWS, RBOX_ROWS

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
    meta_keys: tuple[str, ...] = field(default=())
    synth: str | None = None

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)


_FIELDS: dict[str, FieldSpec] = {}
_ATTRS: dict[str, tuple[FieldSpec, AttrSpec]] = {}


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


def get_field(name: str) -> FieldSpec:
    """The spec of a field by its name (or by one of its attribute names)."""
    spec = _FIELDS.get(name) or (_ATTRS[name][0] if name in _ATTRS else None)
    if spec is None:
        raise KeyError(f"instance field {name!r} is not registered (known: {', '.join(sorted(_FIELDS))})")
    return spec


def registered_fields() -> tuple[FieldSpec, ...]:
    """Every registered field, in registration order (built-ins first)."""
    return tuple(_FIELDS.values())


def field_specs(fields: Sequence[str | FieldSpec]) -> tuple[FieldSpec, ...]:
    """The specs of ``fields`` (names or specs) in order, each once (bind them when a pipeline is built, not per sample)."""
    out: list[FieldSpec] = []
    for name in fields:
        spec = name if isinstance(name, FieldSpec) else get_field(name)
        if spec not in out:
            out.append(spec)
    return tuple(out)


def attr_spec(name: str) -> AttrSpec | None:
    """The registered attribute ``name``, or ``None``."""
    hit = _ATTRS.get(name)
    return None if hit is None else hit[1]


def field_of_attr(name: str) -> FieldSpec | None:
    hit = _ATTRS.get(name)
    return None if hit is None else hit[0]


def pad_rows(values: Any, image_of: Any, slot: Any, batch: int, m: int, fill: float | bool = 0) -> Any:
    """Scatter ``(N, ...)`` rows into a ``(B, M, ...)`` tensor filled with ``fill``."""
    import torch

    out = torch.full((batch, m, *values.shape[1:]), fill, dtype=values.dtype, device=values.device)
    out[image_of, slot] = values
    return out


# ---------------------------------------------------------------------- rboxes
def _rboxes_affine(v: Values, m: np.ndarray) -> Values:
    m = np.asarray(m, np.float64)
    # A mirror is a similarity too: undo it (x -> -x) before reading scale and turn, and a box's axis at
    # theta mirrors to -theta (an axis, not a direction). The flip check compares the flip rule with this.
    mirrored = bool(np.linalg.det(m[:, :2]) < 0)
    unmirrored = m * np.array([-1.0, 1.0, 1.0]) if mirrored else m
    scale, turn = similarity_of(unmirrored)  # a rotated box stays one only under a similarity
    r = v["rboxes"].copy()
    r[:, :2] = affine_points(r[:, :2], m)
    r[:, 2:4] *= scale
    if turn or mirrored:
        r[:, 4] = (-r[:, 4] if mirrored else r[:, 4]) + turn
        return {"rboxes": canonicalize_rboxes(r)}
    return {"rboxes": r.astype(np.float32)}


def _rboxes_flip(v: Values, right: float, meta: Mapping[str, Any]) -> Values:
    return {"rboxes": hflip_rboxes(v["rboxes"], right)}


def _pack_rboxes(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    rows = [np.zeros((int(c), 5), np.float32) if v["rboxes"] is None else v["rboxes"] for v, c in zip(values, counts, strict=True)]
    return {"rboxes": np.concatenate(rows or [np.zeros((0, 5), np.float32)]).astype(np.float32).reshape(-1, 5)}


def _unpack_rboxes(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {"rboxes": pad_rows(t["rboxes"], image_of, slot, batch, m)}


# ------------------------------------------------------------------- keypoints
def _keypoints_affine(v: Values, m: np.ndarray) -> Values:
    return {"keypoints": affine_points(v["keypoints"], m), "visibility": v["visibility"]}


def _keypoints_flip(v: Values, right: float, meta: Mapping[str, Any]) -> Values:
    flip_idx = meta.get("flip_idx")
    if flip_idx is None:
        raise ValueError("keypoints cannot be flipped without flip_idx")
    idx = np.asarray(flip_idx, dtype=np.int64)
    kp = v["keypoints"].copy()
    kp[..., 0] = right - kp[..., 0]
    vis = v["visibility"]
    return {"keypoints": kp[:, idx], "visibility": None if vis is None else vis[:, idx]}


def _keypoints_can_flip(meta: Mapping[str, Any]) -> bool:
    return meta.get("flip_idx") is not None


def _keypoints_clip(v: Values, region: tuple[float, float, float, float]) -> Values:
    kp, vis = v["keypoints"], v["visibility"]
    if kp is None or vis is None or not kp.size:
        return v
    inside = (kp[..., 0] >= region[0]) & (kp[..., 0] < region[2]) & (kp[..., 1] >= region[1]) & (kp[..., 1] < region[3])
    return {"keypoints": kp, "visibility": np.where(inside, vis, 0.0).astype(np.float32)}  # points kept, marked absent


def _pack_keypoints(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    k = next((v["keypoints"].shape[1] for v in values if v["keypoints"] is not None), 0)
    kp = [np.zeros((int(c), k, 2), np.float32) if v["keypoints"] is None else v["keypoints"] for v, c in zip(values, counts, strict=True)]
    vis = [np.zeros((int(c), k), np.float32) if v["visibility"] is None else v["visibility"] for v, c in zip(values, counts, strict=True)]
    return {
        "keypoints": np.concatenate(kp or [np.zeros((0, k, 2), np.float32)]).astype(np.float32).reshape(-1, k, 2),
        "visibility": np.concatenate(vis or [np.zeros((0, k), np.float32)]).astype(np.float32).reshape(-1, k),
    }


def _unpack_keypoints(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {
        "keypoints": pad_rows(t["keypoints"], image_of, slot, batch, m),
        "visibility": pad_rows(t["visibility"], image_of, slot, batch, m),
    }


# -------------------------------------------------------------------- polygons
def _polygons_affine(v: Values, m: np.ndarray) -> Values:
    p = v["polygons"].clone()
    if p.points.size:
        p.points = affine_points(p.points, m)
    return {"polygons": p}


def _polygons_flip(v: Values, right: float, meta: Mapping[str, Any]) -> Values:
    p = v["polygons"].clone()
    if p.points.size:
        p.points[:, 0] = right - p.points[:, 0]
    return {"polygons": p}


def _pack_polygons(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    """Rings stay ragged: points, ring lengths and a batch-global owner index (never dense masks)."""
    shift = np.concatenate([[0], np.cumsum(counts)])[:-1]
    polys = [(v["polygons"], s) for v, s in zip(values, shift, strict=True) if v["polygons"] is not None]
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


def _pack_crowd(values: Sequence[Values], counts: np.ndarray) -> dict[str, np.ndarray]:
    rows = [np.zeros(int(c), bool) if v["crowd"] is None else v["crowd"] for v, c in zip(values, counts, strict=True)]
    return {"crowd": np.concatenate(rows or [np.zeros(0, bool)]).astype(bool)}


def _unpack_crowd(t: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {"crowd": pad_rows(t["crowd"], image_of, slot, batch, m, False)}


register_field(FieldSpec(
    name="crowd",  # COCO iscrowd regions: boxes to ignore, carried so the epoch metric scores like pycocotools
    attrs=(AttrSpec("crowd", np.bool_, (), fill=False, fill_missing=True, ignore_region=True),),
    packed=("crowd",),
    pack=_pack_crowd, unpack=_unpack_crowd,
    coco=CROWD_COCO,
))
register_field(FieldSpec(
    name="rboxes",
    attrs=(AttrSpec("rboxes", np.float32, (5,)),),
    packed=("rboxes",),
    pack=_pack_rboxes, unpack=_unpack_rboxes,
    affine=_rboxes_affine, flip=_rboxes_flip,
    yolo=RBOX_ROWS, coco=RBOX_COCO, dota=lambda corners: {"rboxes": corners_to_rbox(corners)},
    synth="lucidyolo.tasks.obb.synthetic:SCENE",
))
register_field(FieldSpec(
    name="keypoints",
    attrs=(
        AttrSpec("keypoints", np.float32, (None, 2), meta_dims=("num_keypoints",)),
        AttrSpec("visibility", np.float32, (None,), meta_dims=("num_keypoints",)),
    ),
    packed=("keypoints", "visibility"),
    pack=_pack_keypoints, unpack=_unpack_keypoints,
    affine=_keypoints_affine, flip=_keypoints_flip, can_flip=_keypoints_can_flip, clip=_keypoints_clip,
    yolo=POSE_ROWS, coco=POSE_COCO,
    meta_keys=("num_keypoints", "flip_idx"),
    synth="lucidyolo.tasks.keypoints.synthetic:SCENE",
))
register_field(FieldSpec(
    name="polygons",
    attrs=(AttrSpec("polygons", ragged=True),),
    packed=("poly_points", "poly_ring_lengths", "poly_ring_owner"),
    pack=_pack_polygons, unpack=_unpack_polygons,
    affine=_polygons_affine, flip=_polygons_flip,
    yolo=POLYGON_ROWS, coco=POLYGON_COCO, dota=lambda corners: {"polygons": corners_to_polygons(corners)},
    synth="lucidyolo.tasks.segment.synthetic:SCENE",
))
