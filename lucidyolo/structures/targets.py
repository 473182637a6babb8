"""Per-image ground truth: one container whose fields all share the length N.

Readers produce :class:`Targets` in original image pixels; augmentation filters
and transforms them with one keep mask for every field; the loader packs them
into dense tensors. Numpy only: this module must import without torch.

Polygons are ragged (an instance may own several rings, each ring has its own
point count), so they live in :class:`Polygons` as one flat point array plus
offsets, never as a list of Python lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_OPTIONAL_FIELDS = ("polygons", "rboxes", "keypoints", "visibility")


@dataclass
class Polygons:
    """Ragged rings of all instances of one image.

    Attributes:
        points: ``(P, 2)`` float32 ``x, y`` in pixels, all rings concatenated.
        ring_offsets: ``(R + 1,)`` int64; ring ``r`` is
            ``points[ring_offsets[r]:ring_offsets[r + 1]]``.
        ring_owner: ``(R,)`` int64 instance index of each ring. Rings of one
            instance need not be adjacent, but readers emit them in owner order.
    """

    points: np.ndarray
    ring_offsets: np.ndarray
    ring_owner: np.ndarray

    def __post_init__(self) -> None:
        self.points = np.asarray(self.points, dtype=np.float32).reshape(-1, 2)
        self.ring_offsets = np.asarray(self.ring_offsets, dtype=np.int64).reshape(-1)
        self.ring_owner = np.asarray(self.ring_owner, dtype=np.int64).reshape(-1)
        if self.ring_offsets.size == 0:
            self.ring_offsets = np.zeros(1, dtype=np.int64)

    # ----------------------------------------------------------------- build
    @classmethod
    def empty(cls) -> Polygons:
        """A container with no rings."""
        return cls(np.zeros((0, 2), np.float32), np.zeros(1, np.int64), np.zeros(0, np.int64))

    @classmethod
    def from_rings(cls, rings: Sequence[np.ndarray], owners: Sequence[int]) -> Polygons:
        """Build from a list of ``(n_r, 2)`` rings and their owner indices."""
        if len(rings) != len(owners):
            raise ValueError(f"{len(rings)} rings but {len(owners)} owners")
        if not rings:
            return cls.empty()
        arrays = [np.asarray(r, dtype=np.float32).reshape(-1, 2) for r in rings]
        lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(np.concatenate(arrays, axis=0), offsets, np.asarray(owners, dtype=np.int64))

    # ----------------------------------------------------------------- query
    @property
    def num_rings(self) -> int:
        return int(self.ring_owner.shape[0])

    def ring(self, r: int) -> np.ndarray:
        """Ring ``r`` as a ``(n_r, 2)`` view into :attr:`points`."""
        return self.points[self.ring_offsets[r] : self.ring_offsets[r + 1]]

    def ring_lengths(self) -> np.ndarray:
        """``(R,)`` int64 point count of every ring."""
        return np.diff(self.ring_offsets)

    def point_owner(self) -> np.ndarray:
        """``(P,)`` int64 owning instance of every point (vectorised transforms)."""
        return np.repeat(self.ring_owner, self.ring_lengths())

    def rings_of(self, instance: int) -> list[np.ndarray]:
        """All rings owned by one instance (copies)."""
        return [self.ring(r).copy() for r in np.flatnonzero(self.ring_owner == instance)]

    # ------------------------------------------------------------- transform
    def filter(self, keep: np.ndarray, num_instances: int | None = None) -> Polygons:
        """Keep the rings of the kept instances and re-index their owners.

        Args:
            keep: ``(N,)`` bool mask over instances, or an int index array
                (selected order is honoured, owners become positions in it).
            num_instances: N, checked against the length of a bool mask.

        Returns:
            New :class:`Polygons` whose owners index the kept instances.
        """
        keep = np.asarray(keep)
        if keep.dtype == bool:
            if num_instances is not None and keep.shape[0] != num_instances:
                raise ValueError(f"keep mask has {keep.shape[0]} entries, expected {num_instances}")
            index = np.flatnonzero(keep)
        else:
            index = keep.astype(np.int64).reshape(-1)
        if self.num_rings == 0 or index.size == 0:
            return Polygons.empty()
        # Map old instance -> list of new positions (an index array may repeat an instance).
        order = np.argsort(index, kind="stable")
        sorted_idx = index[order]
        # For each ring, find how many times its owner was selected and where.
        lo = np.searchsorted(sorted_idx, self.ring_owner, side="left")
        hi = np.searchsorted(sorted_idx, self.ring_owner, side="right")
        counts = hi - lo
        ring_sel = np.repeat(np.arange(self.num_rings), counts)
        # New owner of each emitted ring copy.
        starts = np.repeat(lo, counts)
        within = np.arange(ring_sel.size) - np.repeat(np.cumsum(counts) - counts, counts)
        new_owner = order[starts + within].astype(np.int64)
        # Emit in new-owner order so rings of one instance stay adjacent.
        emit = np.lexsort((ring_sel, new_owner))
        ring_sel = ring_sel[emit]
        new_owner = new_owner[emit]
        return self._gather_rings(ring_sel, new_owner)

    def _gather_rings(self, ring_sel: np.ndarray, new_owner: np.ndarray) -> Polygons:
        lengths = self.ring_lengths()[ring_sel]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if ring_sel.size:
            starts = self.ring_offsets[ring_sel]
            point_idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
            points = self.points[point_idx]
        else:
            points = np.zeros((0, 2), np.float32)
        return Polygons(points, offsets, new_owner)

    @classmethod
    def concat(cls, parts: Sequence[Polygons], sizes: Sequence[int]) -> Polygons:
        """Concatenate polygon sets of consecutive instance blocks.

        Args:
            parts: polygon sets to join.
            sizes: instance count N of each part (owners of part k are shifted
                by the sum of the sizes before it).
        """
        if len(parts) != len(sizes):
            raise ValueError("parts and sizes differ in length")
        if not parts:
            return cls.empty()
        shift = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])[:-1]
        pshift = np.concatenate([[0], np.cumsum([p.points.shape[0] for p in parts])])[:-1]
        points = np.concatenate([p.points for p in parts], axis=0)
        offsets = np.concatenate(
            [np.zeros(1, np.int64)] + [p.ring_offsets[1:] + s for p, s in zip(parts, pshift, strict=True)]
        )
        owners = np.concatenate([p.ring_owner + s for p, s in zip(parts, shift, strict=True)])
        return cls(points, offsets, owners)

    def clone(self) -> Polygons:
        """Deep copy."""
        return Polygons(self.points.copy(), self.ring_offsets.copy(), self.ring_owner.copy())

    def validate(self, num_instances: int) -> None:
        """Raise ``ValueError`` if offsets, owners or dtypes are inconsistent."""
        if self.points.dtype != np.float32 or self.points.ndim != 2 or self.points.shape[1] != 2:
            raise ValueError(f"points must be (P, 2) float32, got {self.points.shape} {self.points.dtype}")
        if self.ring_offsets.shape[0] != self.num_rings + 1:
            raise ValueError("ring_offsets must have R + 1 entries")
        if self.ring_offsets[0] != 0 or self.ring_offsets[-1] != self.points.shape[0]:
            raise ValueError("ring_offsets must start at 0 and end at P")
        if np.any(np.diff(self.ring_offsets) < 0):
            raise ValueError("ring_offsets must be non-decreasing")
        if self.num_rings and (self.ring_owner.min() < 0 or self.ring_owner.max() >= num_instances):
            raise ValueError(f"ring_owner out of range [0, {num_instances})")


@dataclass
class Targets:
    """Ground truth of one image; every present field has length N.

    Attributes:
        boxes: ``(N, 4)`` float32 xyxy in pixels.
        labels: ``(N,)`` int64 contiguous class index.
        difficult: ``(N,)`` bool (DOTA difficult / tile-clipped objects).
        polygons: seg rings, owners index ``0..N-1``; ``None`` for other tasks.
        rboxes: ``(N, 5)`` float32 ``cx, cy, w, h, theta``, long-edge
            canonical (``w >= h``, ``theta`` in ``[-pi/4, 3pi/4)``) for obb.
        keypoints: ``(N, K, 2)`` float32 pixels for pose.
        visibility: ``(N, K)`` float32; 0 = absent, 1 = occluded, 2 = visible.
    """

    boxes: np.ndarray
    labels: np.ndarray
    difficult: np.ndarray
    polygons: Polygons | None = None
    rboxes: np.ndarray | None = None
    keypoints: np.ndarray | None = None
    visibility: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        self.labels = np.asarray(self.labels, dtype=np.int64).reshape(-1)
        self.difficult = np.asarray(self.difficult, dtype=bool).reshape(-1)
        if self.rboxes is not None:
            self.rboxes = np.asarray(self.rboxes, dtype=np.float32).reshape(-1, 5)
        if self.keypoints is not None:
            kp = np.asarray(self.keypoints, dtype=np.float32)
            self.keypoints = kp if kp.ndim == 3 else kp.reshape(kp.shape[0], -1, 2)
        if self.visibility is not None:
            vis = np.asarray(self.visibility, dtype=np.float32)
            self.visibility = vis if vis.ndim == 2 else vis.reshape(vis.shape[0], -1)

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    @property
    def num_keypoints(self) -> int | None:
        return None if self.keypoints is None else int(self.keypoints.shape[1])

    # ----------------------------------------------------------------- build
    @classmethod
    def empty(
        cls,
        polygons: bool = False,
        rboxes: bool = False,
        num_keypoints: int | None = None,
    ) -> Targets:
        """Zero instances with the given optional fields present.

        Args:
            polygons: include an empty :class:`Polygons` (seg).
            rboxes: include a ``(0, 5)`` rbox array (obb).
            num_keypoints: K; include ``(0, K, 2)`` keypoints and ``(0, K)``
                visibility (pose). ``None`` leaves them out.
        """
        k = num_keypoints
        return cls(
            boxes=np.zeros((0, 4), np.float32),
            labels=np.zeros(0, np.int64),
            difficult=np.zeros(0, bool),
            polygons=Polygons.empty() if polygons else None,
            rboxes=np.zeros((0, 5), np.float32) if rboxes else None,
            keypoints=np.zeros((0, k, 2), np.float32) if k is not None else None,
            visibility=np.zeros((0, k), np.float32) if k is not None else None,
        )

    @classmethod
    def empty_for_fields(cls, fields: Sequence[str], num_keypoints: int | None = None) -> Targets:
        """Zero instances carrying ``fields`` (a task's ``TaskSpec.fields``) beyond the core ones."""
        return cls.empty(
            polygons="polygons" in fields,
            rboxes="rboxes" in fields,
            num_keypoints=num_keypoints if "keypoints" in fields else None,
        )

    def empty_like(self) -> Targets:
        """Zero instances with the same optional fields (and K) as ``self``."""
        return self.empty(
            polygons=self.polygons is not None,
            rboxes=self.rboxes is not None,
            num_keypoints=self.num_keypoints,
        )

    @classmethod
    def concat(cls, parts: Sequence[Targets]) -> Targets:
        """Join the instances of several targets (e.g. the four mosaic tiles).

        All parts must carry the same optional fields. Polygon owners are
        shifted so they index the joined instances.
        """
        if not parts:
            raise ValueError("Targets.concat needs at least one part")
        first = parts[0]
        present = {f for f in _OPTIONAL_FIELDS if getattr(first, f) is not None}
        for p in parts[1:]:
            other = {f for f in _OPTIONAL_FIELDS if getattr(p, f) is not None}
            if other != present:
                raise ValueError(f"cannot concat targets with fields {sorted(present)} and {sorted(other)}")
        polys = None
        if "polygons" in present:
            polys = Polygons.concat([p.polygons for p in parts], [len(p) for p in parts])  # type: ignore[misc]
        return cls(
            boxes=np.concatenate([p.boxes for p in parts], axis=0),
            labels=np.concatenate([p.labels for p in parts]),
            difficult=np.concatenate([p.difficult for p in parts]),
            polygons=polys,
            rboxes=np.concatenate([p.rboxes for p in parts], axis=0) if "rboxes" in present else None,  # type: ignore[misc]
            keypoints=np.concatenate([p.keypoints for p in parts], axis=0) if "keypoints" in present else None,  # type: ignore[misc]
            visibility=np.concatenate([p.visibility for p in parts], axis=0) if "visibility" in present else None,  # type: ignore[misc]
        )

    # ------------------------------------------------------------- transform
    def filter(self, keep: np.ndarray) -> Targets:
        """Select instances by a ``(N,)`` bool mask or an int index array.

        One selection applies to every field, so they stay aligned. Returns
        new arrays (fancy indexing copies).
        """
        keep = np.asarray(keep)
        if keep.dtype == bool and keep.shape != (len(self),):
            raise ValueError(f"keep mask has shape {keep.shape}, expected ({len(self)},)")
        if keep.dtype != bool:
            keep = keep.astype(np.int64).reshape(-1)
        return Targets(
            boxes=self.boxes[keep],
            labels=self.labels[keep],
            difficult=self.difficult[keep],
            polygons=None if self.polygons is None else self.polygons.filter(keep, len(self)),
            rboxes=None if self.rboxes is None else self.rboxes[keep],
            keypoints=None if self.keypoints is None else self.keypoints[keep],
            visibility=None if self.visibility is None else self.visibility[keep],
        )

    def clone(self) -> Targets:
        """Deep copy of every field."""
        return Targets(
            boxes=self.boxes.copy(),
            labels=self.labels.copy(),
            difficult=self.difficult.copy(),
            polygons=None if self.polygons is None else self.polygons.clone(),
            rboxes=None if self.rboxes is None else self.rboxes.copy(),
            keypoints=None if self.keypoints is None else self.keypoints.copy(),
            visibility=None if self.visibility is None else self.visibility.copy(),
        )

    def validate(self) -> None:
        """Raise ``ValueError`` when lengths, shapes or dtypes disagree."""
        n = len(self)
        checks: list[tuple[str, np.ndarray | None, tuple, type]] = [
            ("boxes", self.boxes, (n, 4), np.float32),
            ("labels", self.labels, (n,), np.int64),
            ("difficult", self.difficult, (n,), np.bool_),
            ("rboxes", self.rboxes, (n, 5), np.float32),
        ]
        if self.keypoints is not None:
            k = self.keypoints.shape[1]
            checks.append(("keypoints", self.keypoints, (n, k, 2), np.float32))
            if self.visibility is None:
                raise ValueError("keypoints present without visibility")
            checks.append(("visibility", self.visibility, (n, k), np.float32))
        elif self.visibility is not None:
            raise ValueError("visibility present without keypoints")
        for name, arr, shape, dtype in checks:
            if arr is None:
                continue
            if arr.shape != shape:
                raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
            if arr.dtype != dtype:
                raise ValueError(f"{name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
        if self.polygons is not None:
            self.polygons.validate(n)
