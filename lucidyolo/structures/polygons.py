"""Ragged polygon rings of all instances of one image: one flat point array plus offsets.

An instance may own several rings and each ring has its own point count, so
they are never a list of Python lists. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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

    def slice_instances(self, start: int, stop: int) -> Polygons:
        """Rings of instances ``start..stop-1`` (owners re-based to 0), copied.

        Rings are stored in owner order, so the range is found by binary search.
        """
        r0, r1 = np.searchsorted(self.ring_owner, [start, stop], side="left")
        p0, p1 = self.ring_offsets[r0], self.ring_offsets[r1]
        return Polygons(self.points[p0:p1].copy(), self.ring_offsets[r0 : r1 + 1] - p0, self.ring_owner[r0:r1] - start)

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
