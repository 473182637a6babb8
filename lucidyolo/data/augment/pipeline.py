"""The training augmentation pipeline: per-variant strengths, fixed draw order, close-mosaic.

Order per sample (data spec): mosaic (or single image) fused with the random
affine into one resample -> mixup -> copy-paste -> HSV -> horizontal flip.
Images stay planar ``(3, S, S)`` from the resample on (the network's layout):
the resampler returns planes, and the HSV loop only vectorises on planar rows.
Every random number comes from the numpy ``Generator`` the caller passes in,
always in the same order and count per step, so a seed reproduces a stream
draw for draw and steps never shift each other's draws.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lucidyolo.data.augment.affine import (
    FILL_VALUE,
    IsoAffine,
    canvas_to_output,
    clip_and_filter,
    random_scale_translate,
    render_affine_snapped,
    transform_targets,
)
from lucidyolo.data.augment.copy_paste import copy_paste
from lucidyolo.data.augment.flip import draw_flip, hflip_targets
from lucidyolo.data.augment.hsv import apply_hsv_chw, draw_hsv_gains
from lucidyolo.data.augment.letterbox import letterbox_params
from lucidyolo.data.augment.mixup import draw_mixup_lambda, mixup
from lucidyolo.data.augment.mosaic import draw_mosaic_centre, mosaic_placements
from lucidyolo.structures.targets import Targets


@dataclass(frozen=True)
class AugmentStrengths:
    """Probabilities and gains of every step (defaults: variant n)."""

    mosaic: float = 1.0
    scale: float = 0.5
    translate: float = 0.1
    mixup: float = 0.0
    copy_paste: float = 0.1
    hsv_h: float = 0.015
    hsv_s: float = 0.7
    hsv_v: float = 0.4
    flip_lr: float = 0.5
    close_mosaic: int = 10


VARIANT_STRENGTHS: dict[str, AugmentStrengths] = {
    "n": AugmentStrengths(scale=0.5, mixup=0.0, copy_paste=0.1),
    "s": AugmentStrengths(scale=0.9, mixup=0.05, copy_paste=0.15),
    "m": AugmentStrengths(scale=0.9, mixup=0.1, copy_paste=0.4),
    "l": AugmentStrengths(scale=0.9, mixup=0.1, copy_paste=0.5),
    "x": AugmentStrengths(scale=0.9, mixup=0.2, copy_paste=0.6),
}
"""Per-variant strengths from the data spec (scale gain, mixup p, copy-paste p)."""


def strengths_for_variant(variant: str, **overrides: float) -> AugmentStrengths:
    """The spec strengths of ``variant`` (``n s m l x``) with optional field overrides."""
    if variant not in VARIANT_STRENGTHS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(VARIANT_STRENGTHS)}")
    return replace(VARIANT_STRENGTHS[variant], **overrides)


@dataclass
class AugmentedSample:
    """One augmented training sample.

    Attributes:
        image: contiguous ``(3, S, S)`` RGB planes: uint8, or float32 whenever
            device HSV is on.
        targets: instances in network-input pixels.
        hsv_gains: ``(3,)`` float32 gains drawn for this sample (applied
            already unless device HSV is on).
        affine: source -> input map of the main image when no mosaic was
            used, else ``None``.
    """

    image: np.ndarray
    targets: Targets
    hsv_gains: np.ndarray
    affine: IsoAffine | None


class TrainAugment:
    """Builds augmented samples from an image source.

    Args:
        num_images: number of images in the source (for mosaic/mixup partners).
        load_image: ``i -> (H, W, 3) uint8`` decoder (or cache lookup).
        load_targets: ``i -> Targets`` in original pixels (fresh copy).
        image_hw: ``i -> (h, w)`` without decoding.
        img_size: S.
        strengths: probabilities and gains.
        meta: dataset meta the field rules need (``flip_idx``); a sample whose
            fields cannot be mirrored with it (keypoints without ``flip_idx``)
            is never flipped.
        device_hsv: draw HSV gains but leave colours to the accelerator.
    """

    def __init__(
        self,
        num_images: int,
        load_image: Callable[[int], np.ndarray],
        load_targets: Callable[[int], Targets],
        img_size: int,
        strengths: AugmentStrengths,
        meta: Mapping[str, Any] | None = None,
        device_hsv: bool = False,
    ) -> None:
        self.num_images = num_images
        self.load_image = load_image
        self.load_targets = load_targets
        self.size = int(img_size)
        self.strengths = strengths
        self.meta = dict(meta or {})
        self.device_hsv = device_hsv

    # ------------------------------------------------------------ geometry
    def _single(self, index: int, rng: np.random.Generator) -> tuple[np.ndarray, Targets, IsoAffine]:
        s = self.size
        image = self.load_image(index)
        h, w = image.shape[:2]
        lb = letterbox_params(h, w, s).as_affine()
        r, dx, dy = random_scale_translate(rng, self.strengths.scale, self.strengths.translate)
        affine = lb.then(canvas_to_output(s, s, r, dx, dy))
        out = np.full((3, s, s), FILL_VALUE, np.uint8)
        region, affine = render_affine_snapped(out, image, affine)
        targets = clip_and_filter(transform_targets(self.load_targets(index), affine), region)
        return out, targets, affine

    def _mosaic(self, index: int, rng: np.random.Generator) -> tuple[np.ndarray, Targets]:
        s = self.size
        partners = rng.integers(0, self.num_images, size=3)
        indices = [int(index), *(int(i) for i in partners)]
        centre = draw_mosaic_centre(rng, s)
        r, dx, dy = random_scale_translate(rng, self.strengths.scale, self.strengths.translate)
        to_out = canvas_to_output(2 * s, s, r, dx, dy)
        images = [self.load_image(i) for i in indices]
        placements = mosaic_placements([im.shape[:2] for im in images], centre, s)
        out = np.full((3, s, s), FILL_VALUE, np.uint8)
        parts = []
        for i, image, place in zip(indices, images, placements, strict=True):  # 4 tiles, not instances
            region, affine = render_affine_snapped(out, image, place.affine.then(to_out), clip=to_out.apply_region(place.quadrant))
            parts.append(clip_and_filter(transform_targets(self.load_targets(i), affine), region))
        return out, Targets.concat(parts)

    def geometric(self, index: int, rng: np.random.Generator, use_mosaic: bool) -> tuple[np.ndarray, Targets, IsoAffine | None]:
        """Mosaic (when enabled and drawn) or single image, fused with the random affine."""
        if use_mosaic and rng.random() < self.strengths.mosaic:
            image, targets = self._mosaic(index, rng)
            return image, targets, None
        return self._single(index, rng)

    # --------------------------------------------------------------- sample
    def __call__(self, index: int, rng: np.random.Generator, use_mosaic: bool = True) -> AugmentedSample:
        """Augment image ``index`` with draws from ``rng``.

        HSV and the flip run as one pass over the pixels; with device HSV the
        colours are left alone and the (mirrored) planes are returned as float32.
        """
        st = self.strengths
        image, targets, affine = self.geometric(index, rng, use_mosaic)
        if rng.random() < st.mixup:
            partner = int(rng.integers(0, self.num_images))
            image_b, targets_b, _ = self.geometric(partner, rng, use_mosaic)
            image, targets = mixup(image, targets, image_b, targets_b, draw_mixup_lambda(rng), keep_float=self.device_hsv)
        image, targets = copy_paste(image, targets, bool(rng.random() < st.copy_paste), self.meta)
        gains = draw_hsv_gains(rng, st.hsv_h, st.hsv_s, st.hsv_v)
        flip = draw_flip(rng, st.flip_lr) and all(f.can_flip(self.meta) for f in targets.present_fields())
        if flip:
            targets = hflip_targets(targets, image.shape[2], self.meta)
        if self.device_hsv:
            out = np.empty(image.shape, np.float32)
            np.copyto(out, image[:, :, ::-1] if flip else image)
            image = out
        else:
            image = apply_hsv_chw(image, gains, flip)
        return AugmentedSample(image, targets, gains, affine)
