"""Batch transport: a ragged batch flattened into a fixed, small set of dense tensors.

torch's worker queue ships every tensor of a batch as its own shared-memory
segment (one ``mmap`` in the consumer). A natural ``(images, list of per-image
targets)`` batch costs hundreds of segments and in-flight batches can exceed
``vm.max_map_count``. :class:`PackedBatch` always holds the same tensors for a
given field list (instance fields concatenated over the batch plus per-image
counts), whatever the batch size or instance count; :func:`unpack` restores
the padded per-image layout on the destination device.

Images travel as uint8 (4x fewer bytes than float); only device HSV ships
float32 until its colour transform has run.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lucidyolo.structures.fields import FieldSpec, field_specs, pad_rows


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
        fields: the task fields' packed tensors by packed name (see
            :mod:`lucidyolo.structures.fields`), e.g. ``rboxes (N, 5)``,
            ``keypoints (N, K, 2)`` + ``visibility (N, K)``, or ``poly_points
            (P, 2)`` + ``poly_ring_lengths (R,)`` + ``poly_ring_owner (R,)``
            (batch-global instance index into the N).
        fields_order: the task's field names, in order (unpack uses their rules).
        hsv_gains: ``(B, 3)`` float32 device-HSV gains, or ``None``.
    """

    images: Tensor
    counts: Tensor
    boxes: Tensor
    labels: Tensor
    difficult: Tensor
    meta: Tensor
    fields: dict[str, Tensor] = field(default_factory=dict)
    fields_order: tuple[str, ...] = ()
    hsv_gains: Tensor | None = None

    _CORE = ("images", "counts", "boxes", "labels", "difficult", "meta")

    def tensors(self) -> dict[str, Tensor]:
        """Every tensor the batch carries, by name (the shm segments it costs)."""
        out = {name: getattr(self, name) for name in self._CORE}
        out.update(self.fields)
        if self.hsv_gains is not None:
            out["hsv_gains"] = self.hsv_gains
        return out

    @property
    def num_tensors(self) -> int:
        return len(self.tensors())

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def _map(self, fn: Any) -> PackedBatch:
        return PackedBatch(
            *(fn(getattr(self, name)) for name in self._CORE),
            fields={k: fn(v) for k, v in self.fields.items()},
            fields_order=self.fields_order,
            hsv_gains=None if self.hsv_gains is None else fn(self.hsv_gains),
        )

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
    fields: Sequence[str],
    batch_size: int,
    img_size: int,
    instances: int,
    *,
    float_images: bool = False,
    meta: Mapping[str, Any] | None = None,
    ring_points: int = 0,
    rings: int = 0,
    page: int = 1,
) -> int:
    """Bytes of a packed batch whose every image carries ``instances`` instances.

    Computed by packing placeholder samples with :func:`collate_packed` (images
    on the ``meta`` device, so nothing image-sized is allocated): the layout is
    read from the one place that defines it, never restated.

    Args:
        fields: the task's fields (``TaskSpec.fields``).
        batch_size: B.
        img_size: S.
        instances: instances per image.
        float_images: float32 images plus HSV gains (device HSV) instead of uint8.
        meta: the dataset meta giving the fields' trailing sizes (``num_keypoints``);
            a size it does not give counts as 0.
        ring_points, rings: polygon points and rings per image (a ragged field).
        page: round every tensor up to a multiple of this (the shm page size).
    """
    from lucidyolo.structures.targets import Polygons, Targets

    n = int(instances)
    image = torch.empty((3, img_size, img_size), dtype=torch.float32 if float_images else torch.uint8, device="meta")
    meta = {**{k: 0 for f in field_specs(fields) for a in f.attrs for k in a.meta_dims}, **{k: v for k, v in (meta or {}).items() if v is not None}}
    extra: dict[str, Any] = {}
    for spec in field_specs(fields):
        for a in spec.attrs:
            if a.ragged:
                r = int(rings) if n else 0
                offsets = np.linspace(0, int(ring_points) if r else 0, r + 1).astype(np.int64)
                extra[a.name] = Polygons(np.zeros((int(offsets[-1]), 2), np.float32), offsets,
                                         np.arange(r, dtype=np.int64) % max(n, 1))
            elif a.per_image:
                extra[a.name] = a.empty(meta)
            else:
                extra[a.name] = a.filled(n, meta)
    targets = Targets(np.zeros((n, 4), np.float32), np.zeros(n, np.int64), np.zeros(n, bool), **extra)
    sample = SimpleNamespace(
        image=image, targets=targets, index=0, orig_hw=(img_size, img_size), letterbox=(1.0, 0.0, 0.0),
        hsv_gains=np.zeros(3, np.float32) if float_images else None,
    )
    return collate_packed([sample] * int(batch_size), fields).nbytes(page)


def collate_packed(samples: Sequence[Any], fields: Sequence[str | FieldSpec] = ()) -> PackedBatch:
    """Pack :class:`~lucidyolo.data.datasets.Sample` objects into one :class:`PackedBatch`.

    Args:
        samples: B samples with ``image``, ``targets``, ``index``, ``orig_hw``,
            ``letterbox`` and ``hsv_gains``.
        fields: the task's fields beyond boxes/labels/difficult
            (``TaskSpec.fields``), by name or as resolved specs; each packs
            through its rule. Loaders bind the specs themselves: a spec pickles
            by reference to its module, so a worker that unpickles it imports
            (and registers) a plugin's field without any import side effect
            of its own.

    Returns:
        The packed batch; its tensor count depends only on ``fields`` and on
        whether HSV gains are carried.
    """
    specs = field_specs(fields)  # keypoints + visibility resolve to one spec
    targets = [s.targets for s in samples]
    counts = np.array([len(t) for t in targets], dtype=np.int64)
    images = torch.stack([s.image for s in samples])  # (B, 3, S, S)
    meta = np.array([[s.index, *s.orig_hw, *s.letterbox] for s in samples], dtype=np.float64).reshape(-1, 6)
    packed: dict[str, Tensor] = {}
    for spec in specs:
        packed.update({k: torch.from_numpy(v) for k, v in spec.pack([t.values_of(spec) for t in targets], counts).items()})
    gains = [s.hsv_gains for s in samples]
    hsv = None
    if any(g is not None for g in gains):
        hsv = torch.from_numpy(np.stack([np.zeros(3, np.float32) if g is None else g for g in gains]).astype(np.float32))
    return PackedBatch(
        images=images,
        counts=torch.from_numpy(counts),
        boxes=torch.from_numpy(np.concatenate([t.boxes for t in targets]).astype(np.float32).reshape(-1, 4)),
        labels=torch.from_numpy(np.concatenate([t.labels for t in targets]).astype(np.int64)),
        difficult=torch.from_numpy(np.concatenate([t.difficult for t in targets]).astype(bool)),
        meta=torch.from_numpy(meta),
        fields=packed,
        fields_order=tuple(s.name for s in specs),
        hsv_gains=hsv,
    )


def unpack(batch: PackedBatch, device: torch.device | str | None = None, non_blocking: bool = True) -> tuple[Tensor, dict[str, Tensor], dict[str, Tensor]]:
    """Move a packed batch to ``device`` and restore the padded layout there.

    Device HSV must have run already (:func:`lucidyolo.data.device_hsv.apply_device_hsv`,
    called by the training system's ``on_after_batch_transfer``); a batch that still
    carries gains is refused rather than silently left unjittered.

    Args:
        batch: the packed batch (CPU or already on ``device``).
        device: destination; ``None`` keeps the batch's device.
        non_blocking: overlap copies with compute (pinned memory).

    Returns:
        images: ``(B, 3, S, S)`` float32 in ``[0, 1]``.
        gt: ``boxes (B, M, 4)``, ``labels (B, M)`` long, ``mask (B, M)`` bool,
            ``difficult (B, M)`` bool, plus what each field's rule unpacks:
            ``rboxes (B, M, 5)``; ``keypoints (B, M, K, 2)`` and ``visibility
            (B, M, K)``; ``poly_points (P, 2)``, ``poly_ring_lengths (R,)``,
            ``poly_ring_image (R,)``, ``poly_ring_slot (R,)`` (rasterised by the
            task after transfer); ``ignore (B, M)`` bool, the slots an
            ignore-region attribute marks (COCO crowd), when a field has one.
            ``M`` is the largest count (may be 0).
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
        raise ValueError(
            "this batch still carries device-HSV gains: apply them first "
            "(lucidyolo.data.device_hsv.apply_device_hsv; the training system does it after the transfer)"
        )
    images = batch.images.float() / 255.0
    counts = batch.counts
    b = counts.shape[0]
    m = int(meta_counts_max(counts))
    n = batch.labels.shape[0]
    image_of = torch.repeat_interleave(torch.arange(b, device=counts.device), counts)  # (N,)
    starts = torch.cumsum(counts, 0) - counts  # (B,)
    slot = torch.arange(n, device=counts.device) - starts[image_of]  # (N,) position within its image
    gt = {
        "boxes": pad_rows(batch.boxes, image_of, slot, b, m),
        "labels": pad_rows(batch.labels, image_of, slot, b, m),
        "mask": pad_rows(torch.ones(n, dtype=torch.bool, device=counts.device), image_of, slot, b, m, False),
        "difficult": pad_rows(batch.difficult, image_of, slot, b, m, False),
    }
    specs = field_specs(batch.fields_order)
    for spec in specs:
        gt.update(spec.unpack(batch.fields, image_of, slot, b, m))
    ignore = [gt[a.name] for spec in specs for a in spec.attrs if a.ignore_region and a.name in gt]
    if ignore:  # one key the assigners read, whichever field marks the regions
        gt["ignore"] = functools.reduce(torch.logical_or, ignore)
    return images, gt, meta


def meta_counts_max(counts: Tensor) -> int:
    """Largest per-image instance count (one host sync; 0 for an empty batch)."""
    return int(counts.max().item()) if counts.numel() else 0
