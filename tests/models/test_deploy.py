"""The deploy view: o2o only, BatchNorm folded into a copy, top-k output."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from lucidyolo.models.conv import Conv
from lucidyolo.models.deploy import DeployModel, make_deploy_model
from lucidyolo.models.fuse import fuse_conv_bn


def test_fuse_conv_bn_equals_conv_then_eval_bn() -> None:
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, 3, padding=1, groups=2, bias=True)
    bn = nn.BatchNorm2d(6)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.2, 3)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
    bn.eval()
    x = torch.rand(2, 4, 7, 7)
    torch.testing.assert_close(fuse_conv_bn(conv, bn)(x), bn(conv(x)), atol=1e-5, rtol=1e-5)


def test_deploy_raw_o2o_equals_full_model_in_eval(calibrated_nano) -> None:
    """Folding is an identity: checked in float64, where the float32 rounding noise of
    this randomly initialised trunk (~3e-3 on raw boxes, measured against float64)
    cannot hide a wrong fold."""
    model = copy.deepcopy(calibrated_nano).double()
    deployed = make_deploy_model(model)
    images = torch.rand(2, 3, 160, 224, dtype=torch.float64)
    with torch.no_grad():
        full = model(images)
        raw = deployed.forward_raw(images)
    assert full["o2o"]["logits"].std() > 0.1  # non-degenerate network: the check below means something
    torch.testing.assert_close(raw["boxes"], full["o2o"]["boxes"], atol=1e-4, rtol=0)
    torch.testing.assert_close(raw["logits"], full["o2o"]["logits"], atol=1e-4, rtol=0)
    torch.testing.assert_close(raw["anchors"], full["anchors"])


def test_deploy_float32_stays_within_rounding_noise(calibrated_nano) -> None:
    deployed = make_deploy_model(calibrated_nano)
    images = torch.rand(2, 3, 160, 224)
    with torch.no_grad():
        full = calibrated_nano(images)["o2o"]
        raw = deployed.forward_raw(images)
    for key in ("boxes", "logits"):
        scale = full[key].abs().max()
        assert (raw[key] - full[key]).abs().max() <= 1e-3 * scale  # float32 noise, see above


def test_deploy_folds_every_batchnorm_and_drops_o2m(calibrated_nano) -> None:
    deployed = make_deploy_model(calibrated_nano)
    assert isinstance(deployed, DeployModel)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in deployed.modules())
    assert all(m.conv.bias is not None for m in deployed.modules() if isinstance(m, Conv))
    assert not hasattr(deployed, "head") and set(deployed.branch.stems) == {"boxes", "logits"}
    assert not deployed.training
    assert not any(p.requires_grad for p in deployed.parameters())


def test_deploy_leaves_original_untouched(calibrated_nano) -> None:
    before = {k: v.clone() for k, v in calibrated_nano.state_dict().items()}
    make_deploy_model(calibrated_nano)
    after = calibrated_nano.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert any(isinstance(m, nn.BatchNorm2d) for m in calibrated_nano.modules())


def test_deploy_forward_returns_sorted_top300(calibrated_nano) -> None:
    deployed = make_deploy_model(calibrated_nano)
    with torch.no_grad():
        dets = deployed(torch.rand(3, 3, 128, 128))
    assert dets.shape == (3, 300, 6)
    scores = dets[..., 4]
    assert (scores[:, :-1] >= scores[:, 1:]).all()
    assert ((dets[..., 5] >= 0) & (dets[..., 5] < 80)).all()
    assert (dets[..., 5] == dets[..., 5].round()).all()


def test_baked_anchors_match_dynamic_anchors(calibrated_nano) -> None:
    deployed = make_deploy_model(calibrated_nano)
    images = torch.rand(1, 3, 96, 64)
    with torch.no_grad():
        dynamic = deployed(images)
        deployed.bake_anchors(96, 64)
        baked = deployed(images)
    torch.testing.assert_close(baked, dynamic)


def test_deploy_view_carries_every_task_stem_gathered_by_the_kept_index(tmp_path):
    """A task stem reaches the deployed graph and the ONNX file by name, without editing the head or deploy."""
    pytest.importorskip("onnx", reason="the onnx extra is not installed")
    import onnx

    from lucidyolo.decode.e2e import e2e_topk
    from lucidyolo.export.onnx import export_onnx
    from lucidyolo.models import create_model
    from lucidyolo.models.deploy import make_deploy_model
    from lucidyolo.models.head import StemSpec
    from lucidyolo.structures.box_coder import ltrb_to_xyxy

    torch.manual_seed(0)
    model = create_model("n", num_classes=3, extra_stems=[StemSpec("angle", (1,)), StemSpec("kpts", (2, 2))]).eval()
    deployed = make_deploy_model(model, k=20)
    assert deployed.output_names == ("detections", "angle", "kpts")
    images = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        dets, angle, kpts = deployed(images)
        raw = deployed.forward_raw(images)
        _, index = e2e_topk(ltrb_to_xyxy(raw["boxes"], raw["anchors"], raw["strides"]), raw["logits"], 20)
    assert dets.shape == (2, 20, 6) and angle.shape == (2, 20, 1) and kpts.shape == (2, 20, 2, 2)
    torch.testing.assert_close(angle, raw["angle"].gather(1, index[..., None]))
    torch.testing.assert_close(kpts, raw["kpts"].gather(1, index[..., None, None].expand(-1, -1, 2, 2)))
    path = export_onnx(deployed, tmp_path / "m.onnx", img_size=64, output_names=deployed.output_names)
    assert [o.name for o in onnx.load(str(path)).graph.output] == ["detections", "angle", "kpts"]
