"""Map boxes from the letterboxed network frame back to original image pixels.

The letterbox is ``x_net = x_orig * scale + pad_x`` (and the same for ``y``
with ``pad_y``): an aspect-preserving resize followed by a translation. Its
inverse is closed form, so a round trip is exact up to float rounding, and it
is applied to whole ``(N, 4)`` arrays at once.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

ArrayLike = torch.Tensor | np.ndarray


def unletterbox_boxes(
    boxes: ArrayLike,
    scale: float,
    pad_x: float,
    pad_y: float,
    orig_hw: tuple[int, int],
    clip: bool = True,
) -> ArrayLike:
    """Undo the letterbox on ``xyxy`` boxes and clip them to the original image.

    Args:
        boxes: ``(N, 4)`` ``x1, y1, x2, y2`` in network-input pixels (tensor or
            ndarray; the result has the same kind and dtype, float64 input stays
            float64).
        scale: resize factor applied to the original image (``> 0``).
        pad_x: left padding in network pixels added after resizing.
        pad_y: top padding in network pixels added after resizing.
        orig_hw: ``(height, width)`` of the original image in pixels.
        clip: clip to ``[0, width] x [0, height]`` (the COCO pixel frame, whose
            right/bottom edge is the image size, not size - 1).

    Returns:
        ``(N, 4)`` ``xyxy`` boxes in original pixels.
    """
    if scale <= 0:
        raise ValueError(f"letterbox scale must be > 0, got {scale}")
    h, w = orig_hw
    if isinstance(boxes, torch.Tensor):
        shift = boxes.new_tensor([pad_x, pad_y, pad_x, pad_y])
        out = (boxes - shift) / scale  # (N, 4)
        if clip:
            upper = boxes.new_tensor([w, h, w, h])
            out = torch.minimum(out.clamp(min=0), upper)
        return out
    arr = np.asarray(boxes)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    shift = np.array([pad_x, pad_y, pad_x, pad_y], dtype=arr.dtype)
    out = (arr - shift) / np.asarray(scale, dtype=arr.dtype)  # (N, 4)
    if clip:
        out = np.clip(out, 0, np.array([w, h, w, h], dtype=arr.dtype))
    return out


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
