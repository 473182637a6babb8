"""Fold BatchNorm into the preceding convolution for inference.

In eval mode ``bn(conv(x)) = gamma * (W x - mu) / sqrt(var + eps) + beta``,
which is one convolution with weight ``W * gamma / sqrt(var + eps)`` and bias
``beta - mu * gamma / sqrt(var + eps)`` (plus the conv's own bias, if any).
"""

from __future__ import annotations

import torch
from torch import nn

from lucidyolo.models.conv import Conv


@torch.no_grad()
def fuse_conv_bn(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """A new biased ``Conv2d`` equal to ``bn(conv(x))`` with ``bn`` in eval mode.

    Args:
        conv: convolution (with or without bias).
        bn: BatchNorm over the convolution's output channels.

    Returns:
        A new convolution; the inputs are not modified.
    """
    fused = nn.Conv2d(
        conv.in_channels,
        conv.out_channels,
        conv.kernel_size,
        conv.stride,
        conv.padding,
        conv.dilation,
        conv.groups,
        bias=True,
        padding_mode=conv.padding_mode,
        device=conv.weight.device,
        dtype=conv.weight.dtype,
    )
    inv_std = torch.rsqrt(bn.running_var + bn.eps)  # (C_out,)
    gamma = bn.weight if bn.weight is not None else torch.ones_like(inv_std)
    beta = bn.bias if bn.bias is not None else torch.zeros_like(inv_std)
    factor = gamma * inv_std
    fused.weight.copy_(conv.weight * factor.reshape(-1, 1, 1, 1))
    conv_bias = conv.bias if conv.bias is not None else torch.zeros_like(inv_std)
    fused.bias.copy_(beta + (conv_bias - bn.running_mean) * factor)
    return fused


def fold_batchnorm(module: nn.Module) -> nn.Module:
    """Fold every :class:`~lucidyolo.models.conv.Conv`'s BatchNorm into its convolution, in place.

    Args:
        module: a module tree (pass a copy to keep the original untouched).

    Returns:
        The same ``module``, with each ``Conv.bn`` replaced by ``Identity``.
    """
    for sub in module.modules():
        if isinstance(sub, Conv) and isinstance(sub.bn, nn.BatchNorm2d):
            sub.conv = fuse_conv_bn(sub.conv, sub.bn)
            sub.bn = nn.Identity()
    return module
