"""Per-image ground truth: one container whose fields all share the length N.

Readers produce :class:`Targets` in original image pixels; augmentation filters
and transforms them with one keep mask for every field; the loader packs them
into dense tensors. Beyond the core ``boxes``, ``labels`` and ``difficult``,
every attribute belongs to a field registered in
:mod:`lucidyolo.structures.fields`, and every container operation (select,
slice, concat, clone, validate, empty) loops over the present ones through
their rules: nothing here names a field. Numpy only: this module must import
without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.fields import AttrSpec, FieldSpec, attr_spec, field_of_attr, field_specs
from lucidyolo.structures.polygons import Polygons

__all__ = ["Polygons", "Targets"]


class Targets:
    """Ground truth of one image; every present field has length N.

    Attributes:
        boxes: ``(N, 4)`` float32 xyxy in pixels.
        labels: ``(N,)`` int64 contiguous class index.
        difficult: ``(N,)`` bool (DOTA difficult / tile-clipped objects).
        <field attributes>: registered field attributes given as keyword
            arguments, e.g. ``polygons`` (:class:`Polygons`, owners index
            ``0..N-1``), ``rboxes (N, 5)`` float32 ``cx, cy, w, h, theta``
            long-edge canonical (``w >= h``, ``theta`` in ``[-pi/4, 3pi/4)``),
            ``keypoints (N, K, 2)`` float32 pixels and ``visibility (N, K)``
            float32 (0 absent, 1 occluded, 2 visible). A registered attribute
            that is absent reads as ``None``.
    """

    def __init__(self, boxes: Any, labels: Any, difficult: Any, **extra: Any) -> None:
        object.__setattr__(self, "extra", {})
        self.boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
        self.labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        self.difficult = np.asarray(difficult, dtype=bool).reshape(-1)
        for name, value in extra.items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only reached when normal lookup fails: a registered attribute that is absent reads as None
        if name != "extra" and attr_spec(name) is not None:
            return self.__dict__["extra"].get(name)
        raise AttributeError(f"Targets has no attribute {name!r} (not a registered field attribute)")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("boxes", "labels", "difficult"):
            object.__setattr__(self, name, value)
            return
        spec = attr_spec(name)
        if spec is None:
            raise AttributeError(f"{name!r} is not a registered field attribute (see lucidyolo.structures.fields)")
        if value is None:
            self.extra.pop(name, None)
        else:
            self.extra[name] = spec.coerce(value)

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    def __repr__(self) -> str:
        return f"Targets(n={len(self)}, extra={sorted(self.extra)})"

    def _present(self) -> Iterator[tuple[str, AttrSpec, Any]]:
        for name, value in self.extra.items():
            spec = attr_spec(name)
            assert spec is not None
            yield name, spec, value

    def present_fields(self) -> tuple[FieldSpec, ...]:
        """The registered fields with at least one attribute present, each once."""
        out: list[FieldSpec] = []
        for name in self.extra:
            f = field_of_attr(name)
            if f is not None and f not in out:
                out.append(f)
        return tuple(out)

    # ----------------------------------------------------------------- build
    @classmethod
    def empty_for_fields(cls, fields: Sequence[str], meta: Mapping[str, Any] | None = None) -> Targets:
        """Zero instances carrying ``fields`` (a task's ``TaskSpec.fields``).

        ``meta`` gives trailing sizes by the keys the fields' attributes declare
        (``AttrSpec.meta_dims``); a field whose size is unknown is left out.
        """
        meta = dict(meta or {})
        extra = {}
        for f in field_specs(fields):
            if any(meta.get(k) is None for a in f.attrs for k in a.meta_dims):
                continue
            extra.update({a.name: a.empty(meta) for a in f.attrs})
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.int64), np.zeros(0, bool), **extra)

    @classmethod
    def empty(cls) -> Targets:
        """Zero instances and no field (:meth:`empty_for_fields` gives a task's fields)."""
        return cls.empty_for_fields(())

    def empty_like(self) -> Targets:
        """Zero instances with the same fields (and trailing sizes) as ``self``."""
        return Targets(
            self.boxes[:0].copy(), self.labels[:0].copy(), self.difficult[:0].copy(),
            **{name: spec.empty_like(v) for name, spec, v in self._present()},
        )

    @classmethod
    def concat(cls, parts: Sequence[Targets]) -> Targets:
        """Join the instances of several targets (e.g. the four mosaic tiles).

        All parts must carry the same fields. Ragged owners are shifted so
        they index the joined instances.
        """
        if not parts:
            raise ValueError("Targets.concat needs at least one part")
        present = set(parts[0].extra)
        for p in parts[1:]:
            if set(p.extra) != present:
                raise ValueError(f"cannot concat targets with fields {sorted(present)} and {sorted(p.extra)}")
        sizes = [len(p) for p in parts]
        return cls(
            np.concatenate([p.boxes for p in parts], axis=0),
            np.concatenate([p.labels for p in parts]),
            np.concatenate([p.difficult for p in parts]),
            **{name: spec.concat([p.extra[name] for p in parts], sizes) for name, spec, _ in parts[0]._present()},
        )

    # ------------------------------------------------------------- transform
    def filter(self, keep: np.ndarray) -> Targets:
        """Select instances by a ``(N,)`` bool mask or an int index array.

        One selection applies to every field, so they stay aligned. Returns
        new arrays (fancy indexing copies).
        """
        keep = np.asarray(keep)
        n = len(self)
        if keep.dtype == bool and keep.shape != (n,):
            raise ValueError(f"keep mask has shape {keep.shape}, expected ({n},)")
        if keep.dtype != bool:
            keep = keep.astype(np.int64).reshape(-1)
        return Targets(
            self.boxes[keep], self.labels[keep], self.difficult[keep],
            **{name: spec.select(v, keep, n) for name, spec, v in self._present()},
        )

    def slice(self, start: int, stop: int) -> Targets:
        """Instances ``start..stop-1`` as fresh arrays (an image's range of a split's joined targets)."""
        return Targets(
            self.boxes[start:stop].copy(), self.labels[start:stop].copy(), self.difficult[start:stop].copy(),
            **{name: spec.slice(v, start, stop) for name, spec, v in self._present()},
        )

    def clone(self) -> Targets:
        """Deep copy of every field."""
        return Targets(
            self.boxes.copy(), self.labels.copy(), self.difficult.copy(),
            **{name: spec.clone(v) for name, spec, v in self._present()},
        )

    def transformed(self, boxes: np.ndarray, rule: Callable[[FieldSpec, dict[str, Any]], dict[str, Any] | None]) -> Targets:
        """New targets with ``boxes (N, 4)`` and each present field mapped by ``rule(spec, values)``.

        ``rule`` returns the field's new values, or ``None`` when the field has no
        such rule (no geometry): a private copy then travels unchanged. The
        geometric augmentations (affine, flip) are this one loop with their rule.
        """
        t = Targets(boxes, self.labels.copy(), self.difficult.copy())
        for spec in self.present_fields():
            values = self.values_of(spec)
            out = rule(spec, values)
            if out is None:
                out = {a.name: None if values[a.name] is None else a.clone(values[a.name]) for a in spec.attrs}
            for name, value in out.items():
                setattr(t, name, value)
        return t

    def split_image_targets(self) -> tuple[Targets, dict[str, Any]]:
        """``(targets without per-image attributes, {per-image attribute: value})``."""
        image = {name: v for name, spec, v in self._present() if spec.per_image}
        rest = Targets(self.boxes, self.labels, self.difficult,
                       **{name: v for name, v in self.extra.items() if name not in image})
        return rest, image

    def values_of(self, spec: FieldSpec) -> dict[str, Any]:
        """``spec``'s attributes of this image (``None`` where absent), as its rules receive them."""
        return {a.name: self.extra.get(a.name) for a in spec.attrs}

    def validate(self) -> None:
        """Raise ``ValueError`` when lengths, shapes or dtypes disagree, or a field is half present."""
        n = len(self)
        for name, arr, shape, dtype in (("labels", self.labels, (n,), np.int64), ("difficult", self.difficult, (n,), np.bool_)):
            if arr.shape != shape:
                raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
            if arr.dtype != dtype:
                raise ValueError(f"{name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
        if self.boxes.dtype != np.float32:
            raise ValueError(f"boxes has dtype {self.boxes.dtype}, expected float32")
        for f in self.present_fields():
            missing = [a.name for a in f.attrs if a.name not in self.extra]
            if missing:
                raise ValueError(f"field {f.name!r} is present without {', '.join(missing)}")
        for _, spec, v in self._present():
            spec.validate(v, n)
