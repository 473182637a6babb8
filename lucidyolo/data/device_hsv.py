"""HSV colour jitter as a batched torch transform, for running on the accelerator.

With ``data.device_hsv`` the workers still draw the gains (and flips), ship
them in the :class:`~lucidyolo.structures.packed.PackedBatch` with float32
images, and :func:`~lucidyolo.structures.packed.unpack` applies this function
after the transfer. It is the float twin of
:func:`lucidyolo.data.augment.hsv.apply_hsv_chw` (the same exact transform, whose
result is rounded to 8 bits; the two agree within one level).

:func:`resolve_device_hsv` decides whether a run may use it: CUDA only, and only
under precisions whose inputs reach the data hook as float32.
"""

from __future__ import annotations

import dataclasses
import warnings

import torch
from torch import Tensor

from lucidyolo.structures.packed import PackedBatch

SUPPORTED_PRECISIONS = frozenset({"32-true", "32", "16-mixed", "bf16-mixed"})
"""Precisions whose batches are still float32 when the colour transform runs."""

CASTING_STRATEGIES = ("fsdp", "deepspeed")
"""Strategies whose precision plugins cast inputs before the data hook."""

_warned: set[str] = set()


def hsv_jitter(images: Tensor, gains: Tensor) -> Tensor:
    """Shift hue and scale saturation/value of a batch.

    Args:
        images: ``(B, 3, H, W)`` float RGB in ``[0, 255]``.
        gains: ``(B, 3)`` ``gh, gs, gv`` (hue added mod 1; saturation and
            value multiplied by ``1 + g`` and clipped).

    Returns:
        ``(B, 3, H, W)`` float RGB in ``[0, 255]``.
    """
    x = images.float() / 255.0
    r, g, b = x.unbind(1)  # each (B, H, W)
    maxc, _ = x.max(1)
    minc, _ = x.min(1)
    delta = maxc - minc
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    # Hue sextant formula; 0 where the pixel is grey (delta == 0).
    h = torch.where(
        maxc == r,
        (g - b) / safe,
        torch.where(maxc == g, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe),
    )
    h = torch.where(delta > 0, torch.remainder(h / 6.0, 1.0), torch.zeros_like(h))
    s = torch.where(maxc > 0, delta / torch.where(maxc > 0, maxc, torch.ones_like(maxc)), torch.zeros_like(maxc))
    gh, gs, gv = (gains[:, i].float().view(-1, 1, 1) for i in range(3))
    h = torch.remainder(h + gh, 1.0)
    s = (s * (1.0 + gs)).clamp(0.0, 1.0)
    v = (maxc * (1.0 + gv)).clamp(0.0, 1.0)
    # Closed-form HSV -> RGB: channel n uses k = (n + 6h) mod 6.
    h6 = h * 6.0
    out = []
    for n in (5.0, 3.0, 1.0):  # R, G, B
        k = torch.remainder(n + h6, 6.0)
        out.append(v - v * s * torch.clamp(torch.minimum(k, 4.0 - k), 0.0, 1.0))
    return torch.stack(out, 1) * 255.0  # (B, 3, H, W)


def resolve_device_hsv(requested: bool, accelerator: str, precision: str, strategy: str = "auto") -> bool:
    """Whether device HSV can run; warns once per reason and falls back to worker HSV otherwise.

    Args:
        requested: the user's ``data.device_hsv``.
        accelerator: resolved accelerator (``cuda``/``gpu``, ``cpu``, ``mps`` ...).
        precision: Lightning precision string (``32-true``, ``16-mixed`` ...).
        strategy: Lightning strategy name (``ddp``, ``fsdp``, ``deepspeed`` ...).

    Returns:
        True when the transform will run on the device.
    """
    if not requested:
        return False
    reason = None
    if accelerator.lower() not in ("cuda", "gpu"):
        reason = f"accelerator {accelerator!r} is not CUDA"
    elif str(precision) not in SUPPORTED_PRECISIONS:
        reason = f"precision {precision!r} casts inputs before the colour transform (supported: 32-true, 16-mixed, bf16-mixed)"
    elif any(s in strategy.lower() for s in CASTING_STRATEGIES):
        reason = f"strategy {strategy!r} casts inputs in its precision plugin"
    if reason is None:
        return True
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(
            f"data.device_hsv is ignored: {reason}; HSV runs in the loader workers instead.",
            UserWarning,
            stacklevel=2,
        )
    return False


def apply_device_hsv(batch: PackedBatch) -> PackedBatch:
    """The batch with its colour jitter applied on its device: images float32 ``[0, 255]``, gains consumed.

    A batch without gains is returned unchanged.
    """
    if batch.hsv_gains is None:
        return batch
    return dataclasses.replace(batch, images=hsv_jitter(batch.images.float(), batch.hsv_gains), hsv_gains=None)
