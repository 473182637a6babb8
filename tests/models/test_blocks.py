"""Block internals the spec fixes: widths, residuals, attention heads."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.models.attention import C2PSA, Attention, PSABlock
from lucidyolo.models.blocks import SPPF, Bottleneck, C3k, C3k2
from lucidyolo.models.conv import Conv, DWConv
from lucidyolo.models.scales import SCALES


def test_conv_keeps_size_with_same_padding_and_halves_with_stride() -> None:
    x = torch.rand(1, 4, 16, 20)
    assert Conv(4, 8, 3)(x).shape == (1, 8, 16, 20)
    assert Conv(4, 8, 3, 2)(x).shape == (1, 8, 8, 10)
    assert Conv(4, 8, 3).conv.bias is None
    assert DWConv(4, 4).conv.groups == 4


def test_bottleneck_adds_residual_only_when_channels_match() -> None:
    same, diff = Bottleneck(8, 8, e=0.5), Bottleneck(8, 16, e=0.5)
    assert same.residual and not diff.residual
    assert same.cv1.conv.out_channels == 4
    for block in (same, diff):  # zero the last BN affine: output is x (residual) or 0
        torch.nn.init.zeros_(block.cv2.bn.weight)
        torch.nn.init.zeros_(block.cv2.bn.bias)
    x = torch.rand(1, 8, 5, 5)
    torch.testing.assert_close(same.eval()(x), x)
    assert diff.eval()(x).abs().max() == 0


def test_c3k2_concatenates_two_plus_n_halves() -> None:
    block = C3k2(16, 32, n=3, e=0.5)
    assert block.cv1.conv.out_channels == 32  # 2h with h = 16
    assert block.cv2.conv.in_channels == (2 + 3) * 16
    assert all(isinstance(u, Bottleneck) for u in block.m)
    assert block(torch.rand(2, 16, 8, 8)).shape == (2, 32, 8, 8)


def test_c3k2_with_c3k_uses_requested_bottleneck_count() -> None:
    block = C3k2(32, 32, n=1, c3k=True, c3k_depth=1)
    assert isinstance(block.m[0], C3k) and len(block.m[0].m) == 1
    assert len(C3k(8, 8, n=2).m) == 2


def test_c3k2_attention_unit_appends_psablock() -> None:
    block = C3k2(32, 32, n=2, c3k=True, attention=True)
    assert all(isinstance(u[1], PSABlock) for u in block.m)
    assert block(torch.rand(1, 32, 4, 4)).shape == (1, 32, 4, 4)


def test_sppf_residual_when_channels_match() -> None:
    block = SPPF(16, 16)
    assert block.residual and not SPPF(16, 8).residual
    torch.nn.init.zeros_(block.cv2.bn.weight)
    torch.nn.init.zeros_(block.cv2.bn.bias)
    x = torch.rand(1, 16, 6, 6)
    torch.testing.assert_close(block.eval()(x), x)


@pytest.mark.parametrize(("channels", "heads", "key_dim"), [(32, 1, 16), (64, 1, 32), (256, 4, 32)])
def test_attention_heads_and_key_dim(channels: int, heads: int, key_dim: int) -> None:
    attn = Attention(channels)
    assert (attn.num_heads, attn.key_dim) == (heads, key_dim)
    assert attn.qkv.conv.out_channels == channels + 2 * heads * key_dim
    assert attn.pe.conv.groups == channels
    assert attn(torch.rand(2, channels, 3, 5)).shape == (2, channels, 3, 5)


def test_attention_mixes_all_positions() -> None:
    torch.manual_seed(0)
    attn = Attention(64).eval()
    x = torch.rand(1, 64, 6, 6)
    y = x.clone()
    y[..., 5, 5] += 1.0  # far corner: outside the 3x3 positional term of (0, 0)
    assert not torch.allclose(attn(x)[..., 0, 0], attn(y)[..., 0, 0])


def test_c2psa_shape_and_block_count() -> None:
    block = C2PSA(64, 64, n=2)
    assert len(block.m) == 2
    assert block(torch.rand(1, 64, 4, 4)).shape == (1, 64, 4, 4)


def test_scale_table_channels_and_repeats() -> None:
    n, x = SCALES["n"], SCALES["x"]
    assert n.channels(1024) == 256 and n.repeats(2) == 1
    assert x.channels(1024) == 768 and x.repeats(2) == 2
    assert SCALES["m"].channels(1024) == 512
