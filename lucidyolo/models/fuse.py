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
    """Fold BatchNorm into the convolution before it, in place, wherever the order is known.

    The order is known in a :class:`~lucidyolo.models.conv.Conv` (conv, then bn) and in an
    ``nn.Sequential`` whose ``Conv2d`` is followed directly by a ``BatchNorm2d`` of its output
    channels (a plugin's plain blocks). A BatchNorm elsewhere (applied in a ``forward`` the module
    tree does not show) is left as it is: :func:`unfolded_batchnorms` counts those.

    Args:
        module: a module tree (pass a copy to keep the original untouched).

    Returns:
        The same ``module``, each folded BatchNorm replaced by ``Identity``.
    """
    for sub in module.modules():
        if isinstance(sub, Conv) and isinstance(sub.bn, nn.BatchNorm2d):
            sub.conv = fuse_conv_bn(sub.conv, sub.bn)
            sub.bn = nn.Identity()
        elif isinstance(sub, nn.Sequential):
            children = list(sub._modules.items())
            for (name, conv), (bn_name, bn) in zip(children, children[1:], strict=False):
                if (isinstance(conv, nn.Conv2d) and type(bn) is nn.BatchNorm2d and bn.track_running_stats
                        and bn.num_features == conv.out_channels):
                    sub._modules[name] = fuse_conv_bn(conv, bn)
                    sub._modules[bn_name] = nn.Identity()
    return module


def unfolded_batchnorms(module: nn.Module) -> int:
    """BatchNorm layers left in ``module`` (after :func:`fold_batchnorm`: those it could not fold)."""
    return sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())
