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


def test_c3k2_bottleneck_units_are_half_width() -> None:
    # the published layout: a C3k2 Bottleneck unit has e = 0.5 (h = 16 -> inner width 8)
    block = C3k2(16, 32, n=2, e=0.5)
    assert [(u.cv1.conv.in_channels, u.cv1.conv.out_channels, u.cv2.conv.out_channels) for u in block.m] == [
        (16, 8, 16), (16, 8, 16)
    ]


def test_c3k2_with_c3k_chains_c3k_units_of_two_bottlenecks() -> None:
    # the published layout: every C3k inner unit holds two Bottlenecks (e = 1.0) at half the unit's width
    block = C3k2(32, 32, n=1, c3k=True)
    unit = block.m[0]
    assert isinstance(unit, C3k) and len(unit.m) == 2
    assert unit.cv1.conv.out_channels == 8  # h = 16, C3k branch width 16 * 0.5
    assert all(b.cv1.conv.out_channels == 8 for b in unit.m)
    assert len(C3k(8, 8, n=3).m) == 3


def test_c3k2_attention_unit_appends_psablock() -> None:
    block = C3k2(32, 32, n=2, c3k=True, attention=True)
    assert all(isinstance(u[1], PSABlock) for u in block.m)
    assert block(torch.rand(1, 32, 4, 4)).shape == (1, 32, 4, 4)


def test_sppf_first_conv_has_no_activation() -> None:
    # the published layout: SPPF's cv1 is conv + BN only, so negative values reach the pools
    block = SPPF(16, 16).eval()
    assert isinstance(block.cv1.act, torch.nn.Identity) and not isinstance(block.cv2.act, torch.nn.Identity)
    torch.nn.init.constant_(block.cv1.conv.weight, -1.0)
    h = block.cv1(torch.ones(1, 16, 2, 2))
    assert (h < 0).all()


def test_published_layout_of_the_c3k_units_per_variant() -> None:
    from lucidyolo.models import create_model

    # From the published layouts: C3k units (cv3 inside model.<i>.m.0) in the early backbone C3k2
    # (model.2 and model.4) from m up only; C3k units in every neck C3k2 except N5 (model.22), whose single
    # unit is a Bottleneck followed by an attention block at every depth.
    for variant, early in (("n", False), ("s", False), ("m", True), ("l", True), ("x", True)):
        with torch.device("meta"):
            model = create_model(variant)
        assert SCALES[variant].c3k_early is early
        for block in (model.backbone.stage2, model.backbone.stage3[1]):
            assert all(isinstance(u, C3k) is early for u in block.m)
        for block in (model.backbone.stage4[1], model.backbone.stage5[1],
                      model.neck.top4, model.neck.out3, model.neck.out4):
            assert all(isinstance(u, C3k) for u in block.m)
        (unit,) = model.neck.out5.m
        assert isinstance(unit[0], Bottleneck) and isinstance(unit[1], PSABlock)


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
