"""Batch transport: a ragged batch flattened into a fixed, small set of dense tensors.

torch's worker queue ships every tensor of a batch as its own shared-memory
segment (one ``mmap`` in the consumer). A natural ``(images, list of per-image
targets)`` batch costs hundreds of segments and in-flight batches can exceed
``vm.max_map_count``. :class:`PackedBatch` always holds the same tensors for a
given task (instance fields concatenated over the batch plus per-image
counts), whatever the batch size or instance count; :func:`unpack` restores
the padded per-image layout on the destination device.

Images travel as uint8 (4x fewer bytes than float); only device HSV ships
float32 until its colour transform has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import Tensor

TASK_FIELDS: dict[str, tuple[str, ...]] = {
    "det": (),
    "seg": ("poly_points", "poly_ring_lengths", "poly_ring_owner"),
    "obb": ("rboxes",),
    "pose": ("keypoints", "visibility"),
}
"""Extra packed tensors per task (on top of images, counts, boxes, labels, difficult, meta)."""


@dataclass
class PackedBatch:
    """One batch as dense tensors (B images, N instances in total).

    Attributes:
        images: ``(B, 3, S, S)`` uint8 (float32 ``[0, 255]`` when ``hsv_gains`` is set).
        counts: ``(B,)`` int64 instances per image.
        boxes: ``(N, 4)`` float32 xyxy, network-input pixels.
        labels: ``(N,)`` int64.
        difficult: ``(N,)`` bool.
        meta: ``(B, 6)`` float64: source index, original h, original w,
            letterbox scale, pad_x, pad_y (NaN for mosaic samples).
        rboxes: obb ``(N, 5)`` float32.
        keypoints: pose ``(N, K, 2)`` float32.
        visibility: pose ``(N, K)`` float32.
        poly_points: seg ``(P, 2)`` float32, all rings concatenated.
        poly_ring_lengths: seg ``(R,)`` int64 points per ring.
        poly_ring_owner: seg ``(R,)`` int64 batch-global instance index (into the N).
        hsv_gains: ``(B, 3)`` float32 device-HSV gains, or ``None``.
    """

    images: Tensor
    counts: Tensor
    boxes: Tensor
    labels: Tensor
    difficult: Tensor
    meta: Tensor
    rboxes: Tensor | None = None
    keypoints: Tensor | None = None
    visibility: Tensor | None = None
    poly_points: Tensor | None = None
    poly_ring_lengths: Tensor | None = None
    poly_ring_owner: Tensor | None = None
    hsv_gains: Tensor | None = None

    def tensors(self) -> dict[str, Tensor]:
        """Every tensor the batch carries, by field name (the shm segments it costs)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @property
    def num_tensors(self) -> int:
        return len(self.tensors())

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def _map(self, fn: Any) -> PackedBatch:
        return PackedBatch(**{f.name: None if getattr(self, f.name) is None else fn(getattr(self, f.name)) for f in fields(self)})

    def to(self, device: torch.device | str, non_blocking: bool = False) -> PackedBatch:
        """Move every tensor (Lightning's batch transfer calls this)."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> PackedBatch:
        """Pin every tensor (the DataLoader's pin thread calls this)."""
        return self._map(lambda t: t.pin_memory())

    def share_memory_(self) -> PackedBatch:
        """Move every tensor into shared memory in place (one segment each); returns ``self``."""
        for t in self.tensors().values():
            t.share_memory_()
        return self

    def nbytes(self, page: int = 1) -> int:
        """Bytes of all tensors, each rounded up to a multiple of ``page`` (shm allocates whole pages per segment)."""
        return sum(-(-t.numel() * t.element_size() // page) * page for t in self.tensors().values())


def packed_nbytes(
    task: str,
    batch_size: int,
    img_size: int,
    instances: int,
    *,
    float_images: bool = False,
    num_keypoints: int = 0,
    ring_points: int = 0,
    rings: int = 0,
    page: int = 1,
) -> int:
    """Bytes of a packed batch whose every image carries ``instances`` instances.

    Computed by packing placeholder samples with :func:`collate_packed` (images
    on the ``meta`` device, so nothing image-sized is allocated): the layout is
    read from the one place that defines it, never restated.

    Args:
        task: ``det | seg | obb | pose``.
        batch_size: B.
        img_size: S.
        instances: instances per image.
        float_images: float32 images plus HSV gains (device HSV) instead of uint8.
        num_keypoints: K (pose).
        ring_points, rings: polygon points and rings per image (seg).
        page: round every tensor up to a multiple of this (the shm page size).
    """
    from lucidyolo.structures.targets import Polygons, Targets

    n = int(instances)
    image = torch.empty((3, img_size, img_size), dtype=torch.float32 if float_images else torch.uint8, device="meta")
    polygons = None
    if task == "seg":
        r = int(rings) if n else 0
        offsets = np.linspace(0, int(ring_points) if r else 0, r + 1).astype(np.int64)
        polygons = Polygons(np.zeros((int(offsets[-1]), 2), np.float32), offsets, np.arange(r, dtype=np.int64) % max(n, 1))
    k = int(num_keypoints)
    targets = Targets(
        boxes=np.zeros((n, 4), np.float32),
        labels=np.zeros(n, np.int64),
        difficult=np.zeros(n, bool),
        polygons=polygons,
        rboxes=np.zeros((n, 5), np.float32) if task == "obb" else None,
        keypoints=np.zeros((n, k, 2), np.float32) if task == "pose" else None,
        visibility=np.zeros((n, k), np.float32) if task == "pose" else None,
    )
    sample = SimpleNamespace(
        image=image, targets=targets, index=0, orig_hw=(img_size, img_size), letterbox=(1.0, 0.0, 0.0),
        hsv_gains=np.zeros(3, np.float32) if float_images else None,
    )
    return collate_packed([sample] * int(batch_size), task).nbytes(page)


def collate_packed(samples: Sequence[Any], task: str) -> PackedBatch:
    """Pack :class:`~lucidyolo.data.datasets.Sample` objects into one :class:`PackedBatch`.

    Args:
        samples: B samples with ``image``, ``targets``, ``index``, ``orig_hw``,
            ``letterbox`` and ``hsv_gains``.
        task: ``det | seg | obb | pose``; fixes the tensor set.

    Returns:
        The packed batch; its tensor count depends only on ``task`` and on
        whether HSV gains are carried.
    """
    if task not in TASK_FIELDS:
        raise ValueError(f"unknown task {task!r}")
    targets = [s.targets for s in samples]
    counts = np.array([len(t) for t in targets], dtype=np.int64)
    images = torch.stack([s.image for s in samples])  # (B, 3, S, S)
    meta = np.array([[s.index, *s.orig_hw, *s.letterbox] for s in samples], dtype=np.float64).reshape(-1, 6)
    out: dict[str, Tensor | None] = {
        "images": images,
        "counts": torch.from_numpy(counts),
        "boxes": torch.from_numpy(np.concatenate([t.boxes for t in targets]).astype(np.float32).reshape(-1, 4)),
        "labels": torch.from_numpy(np.concatenate([t.labels for t in targets]).astype(np.int64)),
        "difficult": torch.from_numpy(np.concatenate([t.difficult for t in targets]).astype(bool)),
        "meta": torch.from_numpy(meta),
    }
    if task == "obb":
        out["rboxes"] = torch.from_numpy(
            np.concatenate([t.rboxes if t.rboxes is not None else np.zeros((len(t), 5), np.float32) for t in targets]).reshape(-1, 5)
        )
    elif task == "pose":
        k = next((t.keypoints.shape[1] for t in targets if t.keypoints is not None), 0)
        kp = [t.keypoints if t.keypoints is not None else np.zeros((len(t), k, 2), np.float32) for t in targets]
        vis = [t.visibility if t.visibility is not None else np.zeros((len(t), k), np.float32) for t in targets]
        out["keypoints"] = torch.from_numpy(np.concatenate(kp).astype(np.float32).reshape(-1, k, 2))
        out["visibility"] = torch.from_numpy(np.concatenate(vis).astype(np.float32).reshape(-1, k))
    elif task == "seg":
        shift = np.concatenate([[0], np.cumsum(counts)])[:-1]
        polys = [t.polygons for t in targets]
        pts = [p.points for p in polys if p is not None]
        lengths = [p.ring_lengths() for p in polys if p is not None]
        owners = [p.ring_owner + s for p, s in zip(polys, shift, strict=True) if p is not None]
        out["poly_points"] = torch.from_numpy(np.concatenate(pts or [np.zeros((0, 2), np.float32)]).astype(np.float32).reshape(-1, 2))
        out["poly_ring_lengths"] = torch.from_numpy(np.concatenate(lengths or [np.zeros(0, np.int64)]).astype(np.int64))
        out["poly_ring_owner"] = torch.from_numpy(np.concatenate(owners or [np.zeros(0, np.int64)]).astype(np.int64))
    gains = [s.hsv_gains for s in samples]
    if any(g is not None for g in gains):
        out["hsv_gains"] = torch.from_numpy(np.stack([np.zeros(3, np.float32) if g is None else g for g in gains]).astype(np.float32))
    return PackedBatch(**out)  # type: ignore[arg-type]


def _pad(values: Tensor, image_of: Tensor, slot: Tensor, batch: int, m: int, fill: float | bool = 0) -> Tensor:
    """Scatter ``(N, ...)`` rows into a ``(B, M, ...)`` zero/fill tensor."""
    out = torch.full((batch, m, *values.shape[1:]), fill, dtype=values.dtype, device=values.device)
    out[image_of, slot] = values
    return out


def unpack(batch: PackedBatch, device: torch.device | str | None = None, non_blocking: bool = True) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor]]:
    """Move a packed batch to ``device`` and restore the padded layout there.

    Device HSV (``batch.hsv_gains`` set) runs here, after the transfer.

    Args:
        batch: the packed batch (CPU or already on ``device``).
        device: destination; ``None`` keeps the batch's device.
        non_blocking: overlap copies with compute (pinned memory).

    Returns:
        images: ``(B, 3, S, S)`` float32 in ``[0, 1]``.
        gt: ``boxes (B, M, 4)``, ``labels (B, M)`` long, ``mask (B, M)`` bool,
            ``difficult (B, M)`` bool, plus ``rboxes (B, M, 5)`` (obb),
            ``keypoints (B, M, K, 2)`` and ``visibility (B, M, K)`` (pose),
            ``poly_points (P, 2)``, ``poly_ring_lengths (R,)``,
            ``poly_ring_image (R,)``, ``poly_ring_slot (R,)`` (seg; the seg
            task rasterises them). ``M`` is the largest count (may be 0).
        meta: ``index (B,)`` long, ``orig_hw (B, 2)`` long, ``letterbox (B, 3)``
            float64 ``scale, pad_x, pad_y``; kept on the CPU (used for mapping
            predictions back, no device sync needed).
    """
    meta_t = batch.meta
    meta = {
        "index": meta_t[:, 0].long(),
        "orig_hw": meta_t[:, 1:3].long(),
        "letterbox": meta_t[:, 3:6].clone(),
    }
    if device is not None:
        batch = batch.to(device, non_blocking=non_blocking)
    if batch.hsv_gains is not None:
        from lucidyolo.data.device_hsv import hsv_jitter

        images = hsv_jitter(batch.images.float(), batch.hsv_gains) / 255.0
    else:
        images = batch.images.float() / 255.0
    counts = batch.counts
    b = counts.shape[0]
    m = int(meta_counts_max(counts))
    n = batch.labels.shape[0]
    image_of = torch.repeat_interleave(torch.arange(b, device=counts.device), counts)  # (N,)
    starts = torch.cumsum(counts, 0) - counts  # (B,)
    slot = torch.arange(n, device=counts.device) - starts[image_of]  # (N,) position within its image
    gt = {
        "boxes": _pad(batch.boxes, image_of, slot, b, m),
        "labels": _pad(batch.labels, image_of, slot, b, m),
        "mask": _pad(torch.ones(n, dtype=torch.bool, device=counts.device), image_of, slot, b, m, False),
        "difficult": _pad(batch.difficult, image_of, slot, b, m, False),
    }
    if batch.rboxes is not None:
        gt["rboxes"] = _pad(batch.rboxes, image_of, slot, b, m)
    if batch.keypoints is not None and batch.visibility is not None:
        gt["keypoints"] = _pad(batch.keypoints, image_of, slot, b, m)
        gt["visibility"] = _pad(batch.visibility, image_of, slot, b, m)
    if batch.poly_points is not None and batch.poly_ring_lengths is not None and batch.poly_ring_owner is not None:
        owner = batch.poly_ring_owner
        gt["poly_points"] = batch.poly_points
        gt["poly_ring_lengths"] = batch.poly_ring_lengths
        gt["poly_ring_image"] = image_of[owner] if n else owner
        gt["poly_ring_slot"] = slot[owner] if n else owner
    return images, gt, meta


def meta_counts_max(counts: Tensor) -> int:
    """Largest per-image instance count (one host sync; 0 for an empty batch)."""
    return int(counts.max().item()) if counts.numel() else 0
