"""The full model's forward contract (docs/ARCHITECTURE.md) and its constructors."""

from __future__ import annotations

import math

import pytest
import torch

from lucidyolo.errors import ConfigError, UserError
from lucidyolo.models import create_model, list_models
from lucidyolo.structures.box_coder import make_anchors


@pytest.fixture(scope="module")
def nano():
    torch.manual_seed(0)
    return create_model("n", num_classes=7)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_forward_returns_both_branches_in_train_and_eval(nano, mode: str) -> None:
    nano.train(mode == "train")
    images = torch.rand(2, 3, 96, 128)
    out = nano(images)
    a = (12 * 16) + (6 * 8) + (3 * 4)  # anchors at strides 8, 16, 32
    assert set(out) == {"o2m", "o2o", "anchors", "strides"}
    for branch in ("o2m", "o2o"):
        assert set(out[branch]) == {"boxes", "logits"}
        assert out[branch]["boxes"].shape == (2, a, 4)
        assert out[branch]["logits"].shape == (2, a, 7)
    assert out["anchors"].shape == (a, 2)
    assert out["strides"].shape == (a,)


def test_anchors_follow_box_coder_layout_and_are_cached(nano) -> None:
    images = torch.rand(1, 3, 64, 64)
    first = nano(images)
    expected_anchors, expected_strides = make_anchors([(8, 8), (4, 4), (2, 2)], [8, 16, 32])
    torch.testing.assert_close(first["anchors"], expected_anchors)
    torch.testing.assert_close(first["strides"], expected_strides)
    second = nano(images)
    assert second["anchors"] is first["anchors"]  # same size -> the cached tensor
    other = nano(torch.rand(1, 3, 96, 64))
    assert other["anchors"].shape[0] == 12 * 8 + 6 * 4 + 3 * 2


def test_anchor_count_is_8400_at_640() -> None:
    anchors, _ = make_anchors([(80, 80), (40, 40), (20, 20)], [8, 16, 32])
    assert anchors.shape == (8400, 2)


def test_branches_have_separate_weights(nano) -> None:
    o2m = dict(nano.head.o2m.named_parameters())
    o2o = dict(nano.head.o2o.named_parameters())
    assert o2m.keys() == o2o.keys()
    assert all(o2m[k].data_ptr() != o2o[k].data_ptr() for k in o2m)
    with torch.no_grad():
        out = nano.eval()(torch.rand(1, 3, 64, 64))
    assert not torch.equal(out["o2m"]["boxes"], out["o2o"]["boxes"])


def test_class_bias_starts_at_prior_one_percent(nano) -> None:
    prior = -math.log((1 - 0.01) / 0.01)
    for branch in (nano.head.o2m, nano.head.o2o):
        for conv in branch.stems["logits"].outputs["logits"]:  # one 1x1 output conv per level
            torch.testing.assert_close(conv.bias, torch.full((7,), prior))


def test_gradients_reach_the_stem_from_both_branches(nano) -> None:
    nano.train()
    nano.zero_grad()
    out = nano(torch.rand(2, 3, 64, 64))
    (out["o2m"]["logits"].sum() + out["o2o"]["boxes"].sum()).backward()
    assert nano.backbone.stem[0].conv.weight.grad.abs().sum() > 0
    # levels[0][0][0]: the depthwise conv of the class tower's first separable unit at P3
    assert nano.head.o2m.stems["logits"].levels[0][0][0].conv.weight.grad is not None
    assert nano.head.o2o.stems["logits"].levels[0][0][0].conv.weight.grad is None  # o2o logits not in the loss


@pytest.mark.parametrize(("variant", "num_classes", "box_hidden", "class_hidden"), [
    # the published layouts (80 classes): yolo26s cv2.<l>.0 has 32 channels, cv3.<l>.0.1 has 128;
    # yolo26n cv2 16 (the floor), cv3 80 (min(nc, 100) above N3's 64); yolo26x cv2 96, cv3 384
    ("s", 80, 32, 128),
    ("n", 80, 16, 80),
    ("x", 80, 96, 384),
    # the rules at another class count: boxes max(16, C3 // 4), classes max(C3, min(nc, 100))
    ("n", 7, 16, 64),
    ("s", 150, 32, 128),
    ("n", 150, 16, 100),
])
def test_stem_hidden_width_is_shared_and_follows_finest_level(
    variant: str, num_classes: int, box_hidden: int, class_hidden: int
) -> None:
    with torch.device("meta"):
        model = create_model(variant, num_classes=num_classes)
    for tower in model.head.o2o.stems["boxes"].levels:  # two 3x3 Conv
        assert [unit.conv.out_channels for unit in tower] == [box_hidden, box_hidden]
        assert tower[0].conv.kernel_size == tower[1].conv.kernel_size == (3, 3)
    for c, tower in zip(model.neck.out_channels, model.head.o2o.stems["logits"].levels, strict=True):
        # two separable units: depthwise 3x3 at the unit's input width, then a 1x1 Conv to the hidden width
        assert [(unit[0].conv.groups, unit[1].conv.out_channels) for unit in tower] == [
            (c, class_hidden), (class_hidden, class_hidden)
        ]
    assert [conv.in_channels for conv in model.head.o2o.stems["boxes"].outputs["boxes"]] == [box_hidden] * 3


def test_list_models_filters_by_pattern() -> None:
    assert list_models() == ["yolo26n", "yolo26s", "yolo26m", "yolo26l", "yolo26x"]
    assert list_models("yolo26[nm]") == ["yolo26n", "yolo26m"]
    assert list_models("resnet*") == []


def test_create_model_accepts_prefixed_names_and_extra_stems() -> None:
    from lucidyolo.models.head import StemSpec

    model = create_model("yolo26n", num_classes=3, extra_stems=[StemSpec("angle", (1,))])
    assert model.variant == "n" and model.num_classes == 3
    out = model.train()(torch.zeros(1, 3, 64, 64))
    a = out["o2m"]["boxes"].shape[1]
    for branch in ("o2m", "o2o"):  # a task stem becomes an output of both branches, without editing the head
        assert out[branch]["angle"].shape == (1, a, 1)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"variant": "q"}, ConfigError),
        ({"num_classes": 0}, ConfigError),
    ],
)
def test_create_model_rejects_bad_input_with_user_errors(kwargs: dict, error: type[UserError]) -> None:
    with pytest.raises(error) as info:
        create_model(**kwargs)
    assert info.value.fix
