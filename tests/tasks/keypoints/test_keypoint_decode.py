"""Keypoint decode and deploy: each kept row carries the points of its own anchor, ``anchor + raw * stride``.

Checked against hand-made head outputs (the kept anchors are known by construction),
against a seeded nano keypoint model (the anchor found from the row's box), and
the deployed graph (BatchNorm folded) against decode of the eval-mode model.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from lucidyolo.errors import ConfigError
from lucidyolo.structures.box_coder import ltrb_to_xyxy
from lucidyolo.tasks.keypoints.keypoint_detections import KeypointDetections
from lucidyolo.tasks.registry import get_task
from tests.models.conftest import calibrate_batchnorm

K = 7


@pytest.fixture(scope="module")
def spec():
    return get_task("keypoints")


@pytest.fixture(scope="module")
def model(spec):
    torch.manual_seed(0)
    cfg = spec.config_model(variant="n")
    m = spec.build_model(cfg=cfg, num_classes=1, meta={"num_keypoints": K})
    return calibrate_batchnorm(m, torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(1)))


def _expected_points(anchor_xy, stride, kpts):
    """Points of one anchor, written out per point: ``[ax + rx * s, ay + ry * s, 1 / (1 + exp(-v))]``
    from the raw rows ``(rx, ry, v)`` (v the visibility logit); the sigmas do not score a point."""
    out = []
    for rx, ry, v in kpts.tolist():
        out.append([anchor_xy[0] + rx * stride, anchor_xy[1] + ry * stride, 1.0 / (1.0 + math.exp(-v))])
    return torch.tensor(out, dtype=torch.float64)


def _hand_made_outputs():
    """Two images, six anchors on three strides, boxes apart from one another, distinct scores.

    Image 0 ranks anchors 3, 0, 5, 1, 4, 2; image 1 ranks 1, 2, 0, 5, 4, 3, and
    its anchors 5, 4, 3 score below the NMS confidence threshold.
    """
    g = torch.Generator().manual_seed(3)
    anchors = torch.tensor([[4.0, 4.0], [60.0, 4.0], [4.0, 60.0], [60.0, 60.0], [120.0, 20.0], [20.0, 120.0]],
                           dtype=torch.float64)
    strides = torch.tensor([8.0, 8.0, 16.0, 16.0, 32.0, 32.0], dtype=torch.float64)
    logit0 = torch.tensor([3.0, 1.0, -2.0, 4.0, -1.0, 2.0], dtype=torch.float64)  # order 3, 0, 5, 1, 4, 2
    logit1 = torch.tensor([1.0, 3.0, 2.0, -12.0, -11.0, -10.0], dtype=torch.float64)  # order 1, 2, 0 | 5, 4, 3
    logits = torch.stack([logit0, logit1])[..., None]  # (B, A, 1)

    def branch(shift: float):
        return {
            "boxes": torch.full((2, 6, 4), 0.1, dtype=torch.float64),  # tiny boxes: no two overlap
            "logits": logits + shift,
            "kpts": torch.randn(2, 6, K, 3, generator=g, dtype=torch.float64),
            "kpt_sigma": torch.randn(2, 6, K, 2, generator=g, dtype=torch.float64),
        }

    out = {"o2o": branch(0.0), "o2m": branch(0.0), "anchors": anchors, "strides": strides}
    return out, {"e2e": ([3, 0, 5, 1, 4, 2], [1, 2, 0, 5, 4, 3]), "nms": ([3, 0, 5, 1, 4, 2], [1, 2, 0])}


@pytest.mark.parametrize("path", ["e2e", "nms"])
def test_hand_made_outputs_give_each_row_the_points_of_its_anchor(spec, path):
    out, order = _hand_made_outputs()
    branch = out["o2o" if path == "e2e" else "o2m"]
    det = spec.decode(out, path)
    assert isinstance(det, KeypointDetections)
    assert det.rows.shape == (2, 300, 6) and det.keypoints.shape == (2, 300, K, 3)
    for b in range(2):
        kept = order[path][b]
        assert (det.rows[b, : len(kept), 4] > 0).all() and (det.rows[b, len(kept):] == 0).all()
        for row, a in enumerate(kept):
            anchor = out["anchors"][a].tolist()
            stride = float(out["strides"][a])
            torch.testing.assert_close(det.rows[b, row, 4].item(), float(branch["logits"][b, a, 0].sigmoid()))
            expected = _expected_points(anchor, stride, branch["kpts"][b, a])
            torch.testing.assert_close(det.keypoints[b, row], expected, rtol=0, atol=1e-12)
        assert (det.keypoints[b, len(kept):] == 0).all()  # padding rows carry no points
    one = det[1]
    assert one.rows.shape == (300, 6) and one.keypoints.shape == (300, K, 3)


@pytest.mark.parametrize(("variant", "k", "hidden"), [
    ("n", 17, 85),  # the published yolo26n-pose: cv4.<l>.0 has 85 = 5 K channels (N3 64 // 4 = 16 is below)
    ("x", 17, 96),  # the published yolo26x-pose: 96 = N3 384 // 4 (above 5 K)
    ("n", K, 35),
])
def test_one_keypoint_tower_feeds_the_rows_and_the_sigmas(spec, variant, k, hidden):
    cfg = spec.config_model(variant=variant)
    with torch.device("meta"):
        m = spec.build_model(cfg=cfg, num_classes=1, meta={"num_keypoints": k})
    for branch in (m.head.o2m, m.head.o2o):
        assert [n for n in branch.stems] == ["boxes", "logits", "kpts"]
        stem = branch.stems["kpts"]
        for tower in stem.levels:  # two 3x3 Conv at the hidden width
            assert [(u.conv.out_channels, u.conv.kernel_size) for u in tower] == [(hidden, (3, 3))] * 2
        assert [c.out_channels for c in stem.outputs["kpts"]] == [3 * k] * 3
        assert [c.out_channels for c in stem.outputs["kpt_sigma"]] == [2 * k] * 3
        assert all(c.in_channels == hidden for convs in stem.outputs.values() for c in convs)
    # the residual density (6 coupling layers, each an s and a t net) is the model's, outside the head
    flow = m.aux["flow"]
    assert len(flow.s) == len(flow.t) == 6


def test_model_outputs_have_both_keypoint_outputs_on_both_branches(model):
    with torch.no_grad():
        out = model(torch.rand(1, 3, 96, 128))
    a = 12 * 16 + 6 * 8 + 3 * 4
    for branch in ("o2m", "o2o"):
        assert out[branch]["kpts"].shape == (1, a, K, 3)  # x, y offsets and the visibility logit
        assert out[branch]["kpt_sigma"].shape == (1, a, K, 2)
    assert out["o2o"]["kpts"].std() > 0.01  # calibrated: distinct per-anchor values


@pytest.mark.parametrize("path", ["e2e", "nms"])
def test_model_decode_gathers_the_kept_anchor_points(spec, model, path):
    with torch.no_grad():
        out = model(torch.rand(2, 3, 96, 128, generator=torch.Generator().manual_seed(2)))
    branch = out["o2o" if path == "e2e" else "o2m"]
    det = spec.decode(out, path)
    a = out["anchors"].shape[0]
    assert a < 300 and det.rows.shape == (2, 300, 6) and det.keypoints.shape == (2, 300, K, 3)
    for b in range(2):
        boxes = ltrb_to_xyxy(branch["boxes"], out["anchors"], out["strides"])[b]  # (A, 4)
        valid = det.rows[b, :, 4] > 0
        assert valid.sum() >= 10
        for row in torch.nonzero(valid).flatten()[:12].tolist():
            dist = (boxes - det.rows[b, row, :4]).abs().sum(-1)
            anchor = int(dist.argmin())
            assert dist[anchor] < 1e-4 and (dist < 1e-4).sum() == 1  # the box names one anchor
            expected = _expected_points(out["anchors"][anchor].double().tolist(), float(out["strides"][anchor]),
                                        branch["kpts"][b, anchor].double())
            torch.testing.assert_close(det.keypoints[b, row].double(), expected, rtol=1e-5, atol=1e-4)
            assert ((det.keypoints[b, row, :, 2] >= 0) & (det.keypoints[b, row, :, 2] <= 1)).all()
        assert (det.keypoints[b, ~valid] == 0).all()  # padding rows carry no points
    if path == "e2e":
        assert int((det.rows[0, :, 4] > 0).sum()) == a  # top-k keeps every anchor; the rest is padding


def test_deployed_graph_matches_decode_of_the_eval_model(spec, model):
    """BatchNorm folding is the only difference; compared in float64, where the float32 noise of a
    random trunk cannot reorder the top-k or hide a wrong gather."""
    m = copy.deepcopy(model).double().eval()
    deployed = spec.export.deploy(m)
    assert deployed.output_names == ("detections", "keypoints")
    assert not any(isinstance(x, nn.BatchNorm2d) for x in deployed.modules())
    x = torch.rand(2, 3, 96, 128, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    with torch.no_grad():
        dets, points = deployed(x)
        ref = spec.decode(m(x), "e2e")
    assert dets.shape == (2, 300, 6) and points.shape == (2, 300, K, 3)
    assert ref.rows[..., 4].std() > 0.01  # non-degenerate scores: the comparison means something
    torch.testing.assert_close(dets, ref.rows, rtol=0, atol=1e-4)
    torch.testing.assert_close(points, ref.keypoints, rtol=0, atol=1e-4)
    # float32, as exported: the same (sorted) scores within rounding noise; near-equal scores may swap rows
    with torch.no_grad():
        d32, p32 = spec.export.deploy(model)(x.float())
        r32 = spec.decode(model(x.float()), "e2e")
    assert p32.shape == (2, 300, K, 3) and p32.dtype == torch.float32
    torch.testing.assert_close(d32[..., 4], r32.rows[..., 4], rtol=0, atol=1e-3)


def test_auto_without_data_is_a_config_error(spec):
    cfg = spec.config_model(variant="n")
    assert cfg.num_keypoints == "auto"
    with pytest.raises(ConfigError, match="auto"):
        spec.build_model(cfg=cfg, num_classes=1, meta={})
    with pytest.raises(ConfigError, match="auto"):
        spec.build_model(cfg=cfg, num_classes=1)


def test_explicit_count_must_match_the_data(spec):
    cfg = spec.config_model(variant="n", num_keypoints=5)
    with pytest.raises(ConfigError) as info:
        spec.build_model(cfg=cfg, num_classes=1, meta={"num_keypoints": 17})
    assert "5" in info.value.what and "17" in info.value.what
    with pytest.raises(ConfigError) as info:
        spec.build_criterion(cfg=cfg, num_classes=1, meta={"num_keypoints": 17})
    assert "5" in info.value.what and "17" in info.value.what
    # agreeing, or no data to contradict it: the explicit K sizes the stems
    for meta in ({"num_keypoints": 5}, {}):
        m = spec.build_model(cfg=cfg, num_classes=1, meta=meta)
        assert m.head.o2o(m.features(torch.rand(1, 3, 64, 64)))["kpts"].shape[-2:] == (5, 3)
