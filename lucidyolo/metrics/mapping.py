"""Map coordinates from the letterboxed network frame back to original image pixels.

The letterbox is ``x_net = x_orig * scale + pad_x`` (and the same for ``y``
with ``pad_y``): an aspect-preserving resize followed by a translation. Its
inverse is closed form, so a round trip is exact up to float rounding;
:func:`unletterbox` applies it to whole arrays of boxes, points or polygons at
once and is the only implementation every task's output path uses.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

ArrayLike = torch.Tensor | np.ndarray


def unletterbox(
    points: ArrayLike, scale: float, pad_x: float, pad_y: float, orig_hw: tuple[int, int] | None = None
) -> ArrayLike:
    """The one inverse letterbox: ``x = (x_net - pad_x) / scale``, ``y = (y_net - pad_y) / scale``.

    Args:
        points: ``(..., 2k)`` interleaved ``x, y`` in network-input pixels: ``xyxy`` boxes (``k = 2``),
            points ``(..., 2)``, a polygon's flat coordinates. A tensor or an ndarray; the result has the
            same kind and dtype (integers become float64).
        scale: resize factor applied to the original image (``> 0``).
        pad_x: left padding in network pixels added after resizing.
        pad_y: top padding in network pixels added after resizing.
        orig_hw: ``(height, width)`` of the original image: clip to ``[0, width] x [0, height]`` (the COCO
            pixel frame, whose right/bottom edge is the image size, not size - 1); ``None`` keeps
            coordinates outside the image.

    Returns:
        The same shape in original-image pixels.
    """
    if scale <= 0:
        raise ValueError(f"letterbox scale must be > 0, got {scale}")
    if isinstance(points, torch.Tensor):
        arr = points if points.is_floating_point() else points.double()
        pairs = arr.reshape(*arr.shape[:-1], arr.shape[-1] // 2, 2)  # (..., k, 2)
        out = (pairs - pairs.new_tensor([pad_x, pad_y])) / scale
        if orig_hw is not None:
            out = torch.minimum(out.clamp(min=0), out.new_tensor([orig_hw[1], orig_hw[0]]))
        return out.reshape(arr.shape)
    arr = np.asarray(points)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    pairs = arr.reshape(*arr.shape[:-1], arr.shape[-1] // 2, 2)  # (..., k, 2)
    out = (pairs - np.array([pad_x, pad_y], arr.dtype)) / np.asarray(scale, dtype=arr.dtype)
    if orig_hw is not None:
        out = np.clip(out, 0, np.array([orig_hw[1], orig_hw[0]], arr.dtype))
    return out.reshape(arr.shape)


def letterbox_boxes(boxes: ArrayLike, scale: float, pad_x: float, pad_y: float) -> ArrayLike:
    """Forward letterbox of ``(N, 4)`` ``xyxy`` boxes (original -> network pixels).

    Provided so tests and tools can build the exact inverse pair; the data
    pipeline owns the image-side letterbox.
    """
    if isinstance(boxes, torch.Tensor):
        return boxes * scale + boxes.new_tensor([pad_x, pad_y, pad_x, pad_y])
    arr = np.asarray(boxes)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr * np.asarray(scale, dtype=arr.dtype) + np.array(
        [pad_x, pad_y, pad_x, pad_y], dtype=arr.dtype
    )


def image_region(batch_meta: Mapping[str, torch.Tensor], like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Each image's region in the letterboxed input: ``(lo, hi)``, each ``(B, 2)`` ``x, y``; ``None`` for mosaics' NaN."""
    lb = batch_meta["letterbox"].to(like.device, like.dtype)  # (B, 3) scale, pad_x, pad_y
    hw = batch_meta["orig_hw"].to(like.device, like.dtype)  # (B, 2) h, w
    lo = lb[:, 1:3]  # (B, 2) x0, y0
    hi = lo + hw.flip(-1) * lb[:, :1]  # (B, 2) x1, y1
    return (lo, hi) if bool(torch.isfinite(hi).all()) else None


def clip_to_image(decoded: torch.Tensor, batch_meta: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Clip ``(B, K, 6)`` rows' boxes to each image's region in the letterboxed input (no-op for mosaics' NaN)."""
    region = image_region(batch_meta, decoded)
    if region is None:
        return decoded
    lo, hi = region
    boxes = torch.maximum(torch.minimum(decoded[..., :4], hi.repeat(1, 2)[:, None]), lo.repeat(1, 2)[:, None])
    return torch.cat((boxes, decoded[..., 4:]), dim=-1)
