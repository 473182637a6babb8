"""Isotropic scale + translate, fused with the letterbox/mosaic placement into ONE resample.

The spec's random affine has degrees 0 and shear 0, so every geometric step of
the training pipeline (letterbox or mosaic placement, then random scale and
translate) composes into ``x' = s * x + tx``, ``y' = s * y + ty``: an
axis-aligned crop-and-resize. That lets each source image be resampled exactly
once, straight into the final ``S x S`` input. :func:`render_affine` (letterbox,
validation, prediction) uses Pillow ``Image.resize(box=...)`` (bilinear;
antialiased when shrinking) with the exact fractional source box.
:func:`render_affine_snapped` (training) snaps the map by less than one output
pixel so the source box starts on a whole pixel, which lets torch's vectorised
uint8 antialiased bilinear kernel do the resample ~3-5x faster than Pillow
(same filter; <= 1 level apart inside the tile). The targets follow the snapped
map, so labels and pixels stay exactly aligned (docs/decisions/pipeline.md).

Coordinates are edge pixel coordinates: pixel ``j`` covers ``[j, j + 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from lucidyolo.structures.targets import Targets

FILL_VALUE = 114
"""Grey of every pixel no source image covers."""

MIN_SIDE = 2.0
"""An instance survives a transform only if its clipped box has both sides >= 2 px ..."""

MIN_AREA_RATIO = 0.1
"""... and keeps at least 10% of its transformed (pre-clip) area."""


@dataclass(frozen=True)
class IsoAffine:
    """``x' = s * x + tx``, ``y' = s * y + ty`` (edge pixel coordinates)."""

    s: float
    tx: float
    ty: float

    def then(self, other: IsoAffine) -> IsoAffine:
        """The composite ``other(self(p))``."""
        return IsoAffine(other.s * self.s, other.s * self.tx + other.tx, other.s * self.ty + other.ty)

    @property
    def matrix(self) -> np.ndarray:
        """The map as the ``2 x 3`` float64 matrix the field rules take."""
        return np.array([[self.s, 0.0, self.tx], [0.0, self.s, self.ty]], np.float64)

    def apply_region(self, region: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        x0, y0, x1, y1 = region
        return (self.s * x0 + self.tx, self.s * y0 + self.ty, self.s * x1 + self.tx, self.s * y1 + self.ty)


def intersect(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """Intersection of two ``x0, y0, x1, y1`` rectangles (may be empty: ``x1 <= x0``)."""
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def render_affine(
    out: np.ndarray,
    image: np.ndarray,
    affine: IsoAffine,
    clip: tuple[float, float, float, float] | None = None,
) -> tuple[int, int, int, int]:
    """Resample ``image`` through ``affine`` into ``out`` in place (one bilinear resample).

    Only output pixels fully covered by the mapped source (and inside ``clip``,
    in output coordinates) are written, so the source box handed to Pillow
    never leaves the image and the mapping stays exact; all other pixels keep
    their value (the caller pre-fills 114).

    Args:
        out: ``(S_h, S_w, 3)`` uint8 destination.
        image: ``(H, W, 3)`` uint8 source.
        affine: source -> output mapping.
        clip: optional output-frame rectangle the drawing must stay inside.

    Returns:
        The written pixel rectangle ``x0, y0, x1, y1`` (integers, ``x1`` exclusive);
        empty when ``x1 <= x0`` or ``y1 <= y0``.
    """
    h, w = image.shape[:2]
    oh, ow = out.shape[:2]
    region = intersect(affine.apply_region((0.0, 0.0, float(w), float(h))), (0.0, 0.0, float(ow), float(oh)))
    if clip is not None:
        region = intersect(region, clip)
    eps = 1e-6
    x0, y0 = math.ceil(region[0] - eps), math.ceil(region[1] - eps)
    x1, y1 = math.floor(region[2] + eps), math.floor(region[3] + eps)
    if x1 <= x0 or y1 <= y0:
        return (x0, y0, x0, y0)
    s = affine.s
    if s == 1.0 and float(affine.tx).is_integer() and float(affine.ty).is_integer():
        # a whole-pixel shift: Pillow's bilinear samples every source pixel at its own centre
        # (weights 1 and 0), so a copy gives the same bytes ~7x faster (the letterbox of an image
        # whose long side already is S: most of `lucid predict`'s and validation's inputs)
        dx, dy = int(affine.tx), int(affine.ty)
        out[y0:y1, x0:x1] = image[y0 - dy : y1 - dy, x0 - dx : x1 - dx]
        return (x0, y0, x1, y1)
    box = (
        min(max((x0 - affine.tx) / s, 0.0), float(w)),
        min(max((y0 - affine.ty) / s, 0.0), float(h)),
        min(max((x1 - affine.tx) / s, 0.0), float(w)),
        min(max((y1 - affine.ty) / s, 0.0), float(h)),
    )
    pil = Image.fromarray(image)
    out[y0:y1, x0:x1] = np.asarray(pil.resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR, box=box))
    return (x0, y0, x1, y1)


def _output_region(
    out_hw: tuple[int, int], image_hw: tuple[int, int], affine: IsoAffine, clip: tuple[float, float, float, float] | None
) -> tuple[int, int, int, int]:
    """Integer output rectangle fully covered by the mapped image, inside the frame and ``clip``."""
    (h, w), (oh, ow) = image_hw, out_hw
    region = intersect(affine.apply_region((0.0, 0.0, float(w), float(h))), (0.0, 0.0, float(ow), float(oh)))
    if clip is not None:
        region = intersect(region, clip)
    eps = 1e-6
    return math.ceil(region[0] - eps), math.ceil(region[1] - eps), math.floor(region[2] + eps), math.floor(region[3] + eps)


def render_affine_snapped(
    out: np.ndarray,
    image: np.ndarray,
    affine: IsoAffine,
    clip: tuple[float, float, float, float] | None = None,
) -> tuple[tuple[int, int, int, int], IsoAffine]:
    """Like :func:`render_affine`, but first snaps ``affine`` so the source box starts on a whole pixel.

    The translation moves by less than half a source pixel times ``s`` per axis
    (``|dt| <= s / 2`` output pixels): the first written output pixel ``x0`` is
    made the image of the nearest whole source column ``c``, i.e.
    ``tx' = x0 - s * c``. With an integer box start the resample is torch's
    ``interpolate(bilinear, antialias=True)`` with the scale passed explicitly
    (so the crop does not change the filter), which samples output pixel ``i``
    at source ``c + (i + 0.5) / s``: the exact snapped map. The filter is
    Pillow's (same kernel and support); the kernel is cut at the crop start,
    so the first written row/column may differ from Pillow by a few levels.
    Callers must transform targets with the returned affine.

    Args:
        out: ``(3, S_h, S_w)`` uint8 planar destination, written in place (the
            kernel returns planes, so placing them costs no transpose).
        image: ``(H, W, 3)`` uint8 source.
        affine: source -> output mapping (before snapping).
        clip: optional output-frame rectangle the drawing must stay inside.

    Returns:
        The written pixel rectangle ``x0, y0, x1, y1`` (empty when ``x1 <= x0`` or
        ``y1 <= y0``) and the snapped affine actually rendered.
    """
    h, w = image.shape[:2]
    x0, y0, x1, y1 = _output_region(out.shape[1:], (h, w), affine, clip)
    if x1 <= x0 or y1 <= y0:
        return (x0, y0, x0, y0), affine
    s = affine.s
    cx = min(max(round((x0 - affine.tx) / s), 0), w - 1)
    cy = min(max(round((y0 - affine.ty) / s), 0), h - 1)
    snapped = IsoAffine(s, x0 - s * cx, y0 - s * cy)
    # rounding up the box start can move the image's far edge inside the old region
    eps = 1e-6
    x1 = min(x1, math.floor(snapped.tx + s * w + eps))
    y1 = min(y1, math.floor(snapped.ty + s * h + eps))
    if x1 <= x0 or y1 <= y0:  # ... even empty it (a one-pixel sliver at the far edge): nothing to resample
        return (x0, y0, x0, y0), snapped
    # crop end: last sample centre plus the filter support (max(1, 1/s) source px) and one px slack
    support = max(1.0, 1.0 / s) + 1.0
    ex = min(w, math.ceil(cx + (x1 - x0) / s + support))
    ey = min(h, math.ceil(cy + (y1 - y0) / s + support))
    crop = torch.from_numpy(image[cy:ey, cx:ex].copy()).permute(2, 0, 1)[None]  # (1, 3, h', w') channels-last; copy: cache views are read-only
    res = F.interpolate(crop, scale_factor=(s, s), recompute_scale_factor=False, mode="bilinear", antialias=True, align_corners=False)
    # floor() of the output size can fall one px short of the float region bound
    y1, x1 = min(y1, y0 + res.shape[2]), min(x1, x0 + res.shape[3])
    if x1 <= x0 or y1 <= y0:
        return (x0, y0, x0, y0), snapped
    out[:, y0:y1, x0:x1] = res[0, :, : y1 - y0, : x1 - x0].numpy()
    return (x0, y0, x1, y1), snapped


def transform_targets(targets: Targets, affine: IsoAffine) -> Targets:
    """Apply ``affine`` to the boxes and, through its rule, every present field (no clipping, no filtering).

    ``targets`` is not modified. Rotated boxes keep their angle (isotropic
    scale); their sides scale by ``s``.
    """
    s, tx, ty = affine.s, affine.tx, affine.ty
    boxes = (targets.boxes * s + np.array([tx, ty, tx, ty], np.float32)).astype(np.float32)
    m = affine.matrix
    return targets.transformed(boxes, lambda spec, v: None if spec.affine is None else spec.affine(v, m))


def clip_and_filter(targets: Targets, region: tuple[float, float, float, float]) -> Targets:
    """Clip boxes to ``region`` and drop instances that did not survive; one keep mask for all fields.

    Survival is the box rule: clipped width and height >= :data:`MIN_SIDE` and
    clipped area / pre-clip area >= :data:`MIN_AREA_RATIO`, and-ed with every
    present field's own ``survive`` rule; a field whose rule is
    ``survive_alone`` (instances without boxes, e.g. points) replaces the box
    rule. Each field then applies its own clip rule (keypoints outside the
    region get visibility 0, coordinates kept). Polygons and rotated boxes have
    none: the mask rasteriser clips to the frame, and a rotated box cut by the
    border stays the annotated object (its clipped axis-aligned box decides
    survival).

    Args:
        targets: instances in the output frame.
        region: ``x0, y0, x1, y1`` visible rectangle of their source image.
    """
    if len(targets) == 0:
        return targets
    fields = targets.present_fields()
    keep = np.ones(len(targets), bool)
    for spec in fields:
        if spec.survive is not None:
            keep &= np.asarray(spec.survive(targets.values_of(spec), region), bool)
    b = targets.boxes
    clipped = np.empty_like(b)
    clipped[:, 0::2] = np.clip(b[:, 0::2], region[0], region[2])
    clipped[:, 1::2] = np.clip(b[:, 1::2], region[1], region[3])
    if not any(spec.survive_alone for spec in fields):
        pre_area = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
        cw = clipped[:, 2] - clipped[:, 0]
        ch = clipped[:, 3] - clipped[:, 1]
        keep &= (cw >= MIN_SIDE) & (ch >= MIN_SIDE) & (cw * ch >= MIN_AREA_RATIO * np.maximum(pre_area, 1e-9))
    targets.boxes = clipped.astype(np.float32)
    for spec in fields:
        if spec.clip is not None:
            for name, value in spec.clip(targets.values_of(spec), region).items():
                setattr(targets, name, value)
    return targets if keep.all() else targets.filter(keep)


def random_scale_translate(rng: np.random.Generator, scale_gain: float, translate: float) -> tuple[float, float, float]:
    """Draw ``(r, dx, dy)``: scale ``U[1 - gain, 1 + gain]``, translations ``U[-t, t]`` (fractions of S).

    Exactly three draws, always in this order, so the stream stays aligned.
    """
    r = rng.uniform(1.0 - scale_gain, 1.0 + scale_gain)
    dx, dy = rng.uniform(-translate, translate, size=2)
    return float(r), float(dx), float(dy)


def canvas_to_output(canvas_size: float, out_size: int, r: float, dx: float, dy: float) -> IsoAffine:
    """Affine that scales by ``r`` about the canvas centre, lands it on the output centre, then shifts.

    Args:
        canvas_size: side of the (virtual) input canvas (2S for mosaic, S otherwise).
        out_size: output side S.
        r: scale.
        dx, dy: translation as fractions of S.
    """
    c_in = canvas_size / 2.0
    c_out = out_size / 2.0
    return IsoAffine(r, c_out - r * c_in + dx * out_size, c_out - r * c_in + dy * out_size)

