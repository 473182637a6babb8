"""The public trunk: what a plugin builds its own head on."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.errors import ConfigError
from lucidyolo.models import build_trunk, create_model


def test_three_maps_at_strides_8_16_32_for_a_non_square_input():
    trunk = build_trunk("n").eval()
    with torch.no_grad():
        feats = trunk(torch.zeros(2, 3, 96, 160))
    assert trunk.strides == (8, 16, 32)
    assert [tuple(f.shape) for f in feats] == [
        (2, c, 96 // s, 160 // s) for c, s in zip(trunk.out_channels, trunk.strides, strict=True)
    ]


def test_without_the_neck_the_maps_are_the_backbones():
    full, bare = build_trunk("n"), build_trunk("yolo26n", neck=False)
    assert bare.out_channels == full.backbone.out_channels
    assert not any(k.startswith("neck.") for k in bare.state_dict())


def test_a_detection_models_weights_load_by_name_and_give_its_features():
    torch.manual_seed(0)
    det = create_model("n", num_classes=3).eval()
    trunk = build_trunk("n").eval()
    det_state = det.state_dict()
    trunk.load_state_dict({k: det_state[k] for k in trunk.state_dict()}, strict=True)
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(trunk(x), det.features(x), strict=True):
            assert torch.equal(a, b)


def test_an_unknown_variant_is_a_config_error():
    with pytest.raises(ConfigError, match="Unknown model variant 'q'"):
        build_trunk("q")
