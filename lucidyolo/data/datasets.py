"""Torch datasets over an :class:`~lucidyolo.data.source.ImageSource`: training (augmented) and validation (letterbox).

Both yield one :class:`Sample`; :func:`lucidyolo.structures.packed.collate_packed`
turns a list of them into a :class:`~lucidyolo.structures.packed.PackedBatch`.

Randomness (training): no global RNG is touched. Each sample's draws come
from its own numpy ``Generator`` seeded by ``(seed, epoch, position)``, its
place in the epoch's order, so a sample is the same whichever process builds
it: the stream depends neither on the worker count nor on what the process
did before (a resumed run replays it exactly). The epoch and position travel
with each index (``(epoch, position, index)`` from
:class:`lucidyolo.data.loader.EpochSampler`), so persistent workers switch
streams and close-mosaic at the right epoch too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from lucidyolo.data.augment.letterbox import letterbox_image, letterbox_targets
from lucidyolo.data.augment.pipeline import AugmentStrengths, TrainAugment, strengths_for_variant
from lucidyolo.data.cache import (
    DecodedImageCache,
    file_table,
    host_available_bytes,
    want_auto_cache,
)
from lucidyolo.data.image_io import read_image_fast
from lucidyolo.data.shm import local_world_size
from lucidyolo.data.source import ImageSource
from lucidyolo.structures.targets import Targets


@dataclass
class Sample:
    """One network-ready sample.

    Attributes:
        image: ``(3, S, S)`` uint8 RGB (float32 in ``[0, 255]`` with device HSV).
        targets: instances in network-input pixels.
        index: source index of the (main) image.
        orig_hw: original ``(h, w)`` of that image.
        letterbox: ``(scale, pad_x, pad_y)`` with ``x_input = scale * x + pad_x``;
            NaN for mosaic samples (four images, no single map).
        hsv_gains: ``(3,)`` float32 gains still to apply on the device, else ``None``.
    """

    image: torch.Tensor
    targets: Targets
    index: int
    orig_hw: tuple[int, int]
    letterbox: tuple[float, float, float]
    hsv_gains: np.ndarray | None = None


def _to_chw(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))  # (3, S, S)


class TrainDataset(Dataset):
    """Augmented training samples.

    Args:
        source: the training split.
        img_size: S (a multiple of 32).
        variant: model variant ``n s m l x``; picks the spec strengths.
        seed: run seed.
        epochs: total epochs (enables the close-mosaic switch); ``None`` = mosaic always.
        close_mosaic: number of final epochs without mosaic (default: the strengths').
        strengths: explicit strengths (overrides ``variant``).
        device_hsv: leave the colour jitter to the accelerator (float32 transport).
        cache_images: decode every distinct file once into RAM (or pass a built cache);
            ``"auto"``: only when the split is small (:func:`~lucidyolo.data.cache.want_auto_cache`).
    """

    def __init__(
        self,
        source: ImageSource,
        img_size: int,
        variant: str = "n",
        seed: int = 0,
        *,
        epochs: int | None = None,
        close_mosaic: int | None = None,
        strengths: AugmentStrengths | None = None,
        device_hsv: bool = False,
        cache_images: bool | str | DecodedImageCache = False,
    ) -> None:
        self.source = source
        self.img_size = int(img_size)
        self.seed = int(seed)
        self.strengths = strengths or strengths_for_variant(variant)
        self.epochs = epochs
        self.close_mosaic = self.strengths.close_mosaic if close_mosaic is None else int(close_mosaic)
        self.device_hsv = device_hsv
        if isinstance(cache_images, DecodedImageCache):
            self.cache: DecodedImageCache | None = cache_images
        else:
            table = file_table(source)
            if cache_images == "auto":
                cache_images = want_auto_cache(table.nbytes, host_available_bytes(), local_world_size())
            self.cache = DecodedImageCache(source, self._decode, table=table) if cache_images else None
        self.augment = TrainAugment(
            len(source), self._load, source.targets, self.img_size, self.strengths, source.meta(), device_hsv
        )
        self.epoch = 0

    def _decode(self, i: int) -> np.ndarray:
        return read_image_fast(self.source.image_path(i))

    def _load(self, i: int) -> np.ndarray:
        return self.cache.get(i) if self.cache is not None else self._decode(i)

    def __len__(self) -> int:
        return len(self.source)

    def set_epoch(self, epoch: int) -> None:
        """Epoch used for plain integer indices (0-worker use without :class:`EpochSampler`)."""
        self.epoch = int(epoch)

    def mosaic_enabled(self, epoch: int) -> bool:
        """Close-mosaic switch: mosaic is off for the last ``close_mosaic`` epochs."""
        return self.epochs is None or epoch < self.epochs - self.close_mosaic

    def rng_for(self, epoch: int, position: int) -> np.random.Generator:
        """The generator of the sample at ``position`` of ``epoch`` (a pure function of the run seed and those two)."""
        return np.random.default_rng(np.random.SeedSequence([self.seed, int(epoch), int(position)]))

    def __getitem__(self, item: int | tuple[int, ...]) -> Sample:
        """``(epoch, position, index)`` from the sampler; a plain index uses :meth:`set_epoch`'s epoch and itself as position."""
        if isinstance(item, tuple):
            epoch, position, index = (int(item[0]), int(item[1]), int(item[-1]))
        else:
            epoch, position, index = self.epoch, int(item), int(item)
        out = self.augment(index, self.rng_for(epoch, position), self.mosaic_enabled(epoch))
        lb = (math.nan, math.nan, math.nan) if out.affine is None else (out.affine.s, out.affine.tx, out.affine.ty)
        return Sample(
            image=torch.from_numpy(out.image),  # (3, S, S), already contiguous
            targets=out.targets,
            index=index,
            orig_hw=self.source.image_hw(index),
            letterbox=lb,
            hsv_gains=out.hsv_gains if self.device_hsv else None,
        )


class ValDataset(Dataset):
    """Letterboxed validation samples (no randomness, never cached).

    Args:
        source: the validation split.
        img_size: S.
    """

    def __init__(self, source: ImageSource, img_size: int) -> None:
        self.source = source
        self.img_size = int(img_size)

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, item: int | tuple[int, ...]) -> Sample:
        index = int(item[-1]) if isinstance(item, tuple) else int(item)
        image, params = letterbox_image(read_image_fast(self.source.image_path(index)), self.img_size)
        targets = letterbox_targets(self.source.targets(index), params)
        return Sample(
            image=_to_chw(image),
            targets=targets,
            index=index,
            orig_hw=self.source.image_hw(index),
            letterbox=(params.scale, params.pad_x, params.pad_y),
        )
