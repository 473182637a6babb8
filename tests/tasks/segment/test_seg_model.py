"""The segmentation model: coefficient stems, prototypes, the training-only semantic head, decode and deploy."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.tasks.registry import get_task
from lucidyolo.tasks.segment import hooks as segment_hooks
from lucidyolo.tasks.segment.spec import SegmentModelConfig


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return segment_hooks.build_model(SegmentModelConfig(variant="n"), num_classes=3).eval()


def test_outputs_and_shapes(model):
    x = torch.rand(2, 3, 128, 96)
    out = model(x)
    a = (16 * 12) + (8 * 6) + (4 * 3)
    for branch in ("o2m", "o2o"):
        assert out[branch]["coeffs"].shape == (2, a, 32)
    assert out["protos"].shape == (2, 32, 32, 24)  # stride 4
    assert out["semantic"].shape == (2, 3, 16, 12)  # stride 8, one map per class


def test_coefficients_are_the_raw_output_conv_values():
    """The published layout applies no activation to the coefficients (no tanh): a constant output conv
    of bias 3 gives coefficients of exactly 3 (tanh would give 0.995)."""
    torch.manual_seed(0)
    m = segment_hooks.build_model(SegmentModelConfig(variant="n"), num_classes=3).eval()
    for branch in (m.head.o2m, m.head.o2o):
        for conv in branch.stems["coeffs"].outputs["coeffs"]:
            torch.nn.init.zeros_(conv.weight)
            torch.nn.init.constant_(conv.bias, 3.0)
    with torch.no_grad():
        out = m(torch.rand(1, 3, 64, 64))
    for branch in ("o2m", "o2o"):
        assert torch.equal(out[branch]["coeffs"], torch.full_like(out[branch]["coeffs"], 3.0))


def test_decode_gathers_the_kept_rows_coefficients(model):
    out = model(torch.rand(1, 3, 64, 64))
    for path, branch in (("e2e", "o2o"), ("nms", "o2m")):
        det = segment_hooks.decode(out, path)
        assert det.rows.shape == (1, 300, 6) and det.coeffs.shape == (1, 300, 32)
        assert det.protos is out["protos"]
        # A row's coefficients are those of the anchor whose box it carries.
        from lucidyolo.structures.box_coder import ltrb_to_xyxy

        boxes = ltrb_to_xyxy(out[branch]["boxes"], out["anchors"], out["strides"])[0]  # (A, 4)
        valid = det.rows[0, :, 4] > 0
        for k in torch.nonzero(valid).flatten()[:5].tolist():
            anchor = (boxes - det.rows[0, k, :4]).abs().sum(-1).argmin()
            assert torch.allclose(det.coeffs[0, k], out[branch]["coeffs"][0, anchor])
        assert torch.all(det.coeffs[0, ~valid] == 0)  # padding rows carry no coefficients
        one = det[0]
        assert one.rows.shape == (300, 6) and one.protos.shape == (32, 16, 16)


def test_deploy_keeps_prototypes_and_drops_the_semantic_head(model):
    deployed = get_task("seg").export.deploy(model=model)
    assert deployed.output_names == ("detections", "coeffs", "protos")
    assert deployed.extras["protos"].semseg is None
    assert model.extras["protos"].semseg is not None  # the trained model is untouched
    x = torch.rand(1, 3, 64, 64)
    dets, coeffs, protos = deployed(x)
    ref = segment_hooks.decode(model(x), "e2e")
    assert torch.allclose(protos, ref.protos, atol=1e-4)  # BN folding only
    assert torch.allclose(dets[..., :4], ref.rows[..., :4], atol=1e-3)
    assert torch.allclose(coeffs, ref.coeffs, atol=1e-4)


def test_every_parameter_gets_a_gradient_from_the_objective():
    """The mask terms reach the coefficient stems of both branches, the prototypes and the semantic head."""
    torch.manual_seed(0)
    cfg = SegmentModelConfig(variant="n")
    model = segment_hooks.build_model(cfg, num_classes=2).train()
    criterion = segment_hooks.build_criterion(cfg, num_classes=2)
    x = torch.rand(2, 3, 64, 64)
    square = torch.tensor([[8.0, 8.0], [40.0, 8.0], [40.0, 40.0], [8.0, 40.0]])
    tri = torch.tensor([[20.0, 30.0], [60.0, 60.0], [20.0, 60.0]])
    gt = {
        "boxes": torch.tensor([[[8.0, 8.0, 40.0, 40.0]], [[20.0, 30.0, 60.0, 60.0]]]),
        "labels": torch.tensor([[0], [1]]),
        "mask": torch.tensor([[True], [True]]),
        "poly_points": torch.cat([square, tri]),
        "poly_ring_lengths": torch.tensor([4, 3]),
        "poly_ring_image": torch.tensor([0, 1]),
        "poly_ring_slot": torch.tensor([0, 0]),
    }
    total, terms = criterion(model(x), gt, 0.5)
    assert terms["mask"] > 0 and terms["semantic"] > 0
    total.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, missing[:10]


@pytest.mark.parametrize(("variant", "c3", "c4", "c5", "coeff_hidden"), [
    ("n", 64, 128, 256, 32),  # the published yolo26n-seg: proto.* at 64 channels, cv4 towers at max(32, 64 // 4)
    ("x", 384, 768, 768, 96),  # the published yolo26x-seg: proto.* at 384, cv4 towers at 384 // 4
])
def test_prototype_and_coefficient_layout_is_the_published_one(variant, c3, c4, c5, coeff_hidden):
    with torch.device("meta"):
        m = segment_hooks.build_model(SegmentModelConfig(variant=variant), num_classes=80)
    p = m.extras["protos"]
    assert [c.conv.in_channels for c in p.feat_refine] == [c4, c5]
    assert [c.conv.out_channels for c in p.feat_refine] == [c3, c3]
    assert (p.feat_fuse.conv.kernel_size, p.feat_fuse.conv.out_channels) == ((3, 3), c3)
    assert (p.cv1.conv.kernel_size, p.cv1.conv.out_channels) == ((3, 3), c3)
    assert isinstance(p.upsample, torch.nn.ConvTranspose2d)
    assert (p.upsample.kernel_size, p.upsample.stride, p.upsample.out_channels) == ((2, 2), (2, 2), c3)
    assert (p.cv2.conv.kernel_size, p.cv3.conv.kernel_size, p.cv3.conv.out_channels) == ((3, 3), (1, 1), 32)
    assert [type(x).__name__ for x in p.semseg] == ["Conv", "Conv", "Conv2d"] and p.semseg[2].out_channels == 80
    assert p.train_only == ("semseg",)
    for tower in m.head.o2o.stems["coeffs"].levels:
        assert [u.conv.out_channels for u in tower] == [coeff_hidden, coeff_hidden]
