"""Convolutional multi-head self-attention used at stride 32 (``C2PSA``) and in the neck's N5 stage.

Attention over all ``H * W`` positions of a feature map: heads =
``max(1, C // 64)``, key dim = head_dim / 2, q/k/v from one 1x1 conv + BN,
softmax(q^T k / sqrt(key_dim)), a depthwise 3x3 conv + BN positional term on
v, and a 1x1 conv + BN projection.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lucidyolo.models.conv import Conv


class Attention(nn.Module):
    """Multi-head self-attention on a feature map.

    Args:
        channels: input and output channels ``C``.
        attn_ratio: key dim as a fraction of the head dim.
    """

    def __init__(self, channels: int, attn_ratio: float = 0.5) -> None:
        super().__init__()
        self.num_heads = max(1, channels // 64)
        self.head_dim = channels // self.num_heads
        self.key_dim = max(1, int(self.head_dim * attn_ratio))
        self.scale = self.key_dim**-0.5
        qkv_channels = channels + 2 * self.key_dim * self.num_heads
        self.qkv = Conv(channels, qkv_channels, 1, act=False)
        self.pe = Conv(channels, channels, 3, groups=channels, act=False)
        self.proj = Conv(channels, channels, 1, act=False)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, C, H, W)``."""
        b, c, h, w = x.shape
        n = h * w
        qkv = self.qkv(x).view(b, self.num_heads, 2 * self.key_dim + self.head_dim, n)
        q, k, v = qkv.split((self.key_dim, self.key_dim, self.head_dim), dim=2)
        # q, k: (B, heads, key_dim, N); v: (B, heads, head_dim, N)
        attn = (q.transpose(-2, -1) @ k) * self.scale  # (B, heads, N, N)
        attn = attn.softmax(dim=-1)
        out = (v @ attn.transpose(-2, -1)).reshape(b, c, h, w)  # (B, heads, head_dim, N) -> (B, C, H, W)
        out = out + self.pe(v.reshape(b, c, h, w))
        return self.proj(out)


class PSABlock(nn.Module):
    """``x + attn(x)`` then ``x + FFN(x)`` with FFN = Conv(C->2C, 1x1) then conv+BN(2C->C).

    Args:
        channels: input and output channels ``C``.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.attn = Attention(channels)
        self.ffn = nn.Sequential(Conv(channels, 2 * channels, 1), Conv(2 * channels, channels, 1, act=False))

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, C, H, W)``."""
        x = x + self.attn(x)
        return x + self.ffn(x)


class C2PSA(nn.Module):
    """1x1 to ``2h``, split, ``n`` PSABlocks on one half, concat, 1x1 to ``c_out``.

    Args:
        c_in: input channels.
        c_out: output channels.
        n: number of PSABlocks.
        e: hidden width ``h = int(c_out * e)``.
    """

    def __init__(self, c_in: int, c_out: int, n: int = 1, e: float = 0.5) -> None:
        super().__init__()
        h = int(c_out * e)
        self.cv1 = Conv(c_in, 2 * h, 1)
        self.m = nn.Sequential(*(PSABlock(h) for _ in range(n)))
        self.cv2 = Conv(2 * h, c_out, 1)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, c_in, H, W) -> (B, c_out, H, W)``."""
        a, b = self.cv1(x).chunk(2, dim=1)  # 2 x (B, h, H, W)
        return self.cv2(torch.cat((a, self.m(b)), dim=1))
