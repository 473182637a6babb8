"""KeypointTerm: hand cases, a per-point loop reference, masking, grad paths, dtype and the shared flow.

``kpts`` rows are ``(x, y, visibility logit)`` (the published layout); ``kvis`` is the visibility BCE.

The loop reference below is written independently of the vectorised term: a
Python loop over positives and points on plain floats (``math``), calling the
flow on one point at a time.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lucidyolo.assign.assignment import background_assignment
from lucidyolo.losses.criterion import DetectionCriterion
from lucidyolo.structures.box_coder import make_anchors
from lucidyolo.tasks.keypoints.keypoint_loss import KeypointTerm
from lucidyolo.tasks.keypoints.realnvp import RealNVP2D

LN2 = math.log(2.0)
LN3 = math.log(3.0)


def _assignment(fg: torch.Tensor, gt_index: torch.Tensor):
    """An assignment with only what the keypoint term reads (fg_mask, gt_index) filled in."""
    a = background_assignment(fg.shape[0], fg.shape[1], torch.float32, fg.device)
    return a._replace(fg_mask=fg, gt_index=torch.where(fg, gt_index, torch.full_like(gt_index, -1)))


def _randomise_flow(term: KeypointTerm, seed: int = 0, std: float = 0.2) -> KeypointTerm:
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in term.flow.parameters():
            p.normal_(0.0, std)
    return term


def _hand_case() -> dict:
    """One image, 3 anchors, anchor 0 positive on GT 0; GT 0 has points visible (v=2), visible (v=1), absent.

    anchor 0 = (10, 20) px, stride 8; GT 0 box (0, 0, 40, 20): w = 40, h = 20.
    point 0: raw (0.5, -0.25) -> pred (14, 18); gt (18, 15); sigma (sigmoid(-ln 3), sigmoid(0)) = (0.25, 0.5)
             r = ((18 - 14) / 40 / 0.25, (15 - 18) / 20 / 0.5) = (0.4, -0.3)
             L = 0.4 + 0.3 + 2 ln 2 + ln 0.25 + ln 0.5 = 0.7 - ln 2
    point 1: raw (0, 0) -> pred (10, 20); gt (10, 30); sigma (0.5, 0.5)
             r = (0, (30 - 20) / 20 / 0.5) = (0, 1)
             L = 0 + 1 + 2 ln 2 + 2 ln 0.5 = 1
    point 2: absent (its gt and raw values are garbage).
    laplace_nll kpt = (0.7 - ln 2 + 1) / 2.
    visibility logits (0, ln 3, ln 3) against targets (1, 1, 0): BCE = -ln(1/2), -ln(3/4), -ln(1/4)
             kvis = (ln 2 + ln(4/3) + ln 4) / 3 = ln(32/3) / 3 (mean over the N K = 3 pairs).
    """
    kpts = torch.zeros(1, 3, 3, 3)
    kpts[0, 0] = torch.tensor([[0.5, -0.25, 0.0], [0.0, 0.0, LN3], [3.0, 3.0, LN3]])
    kpts[0, 1:] = torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(0))
    sigma = torch.zeros(1, 3, 3, 2)
    sigma[0, 0] = torch.tensor([[-LN3, 0.0], [0.0, 0.0], [5.0, 5.0]])
    sigma[0, 1:] = 2.0
    targets = {
        "boxes": torch.tensor([[[0.0, 0.0, 40.0, 20.0], [20.0, 20.0, 60.0, 60.0]]]),
        "keypoints": torch.tensor([[[[18.0, 15.0], [10.0, 30.0], [999.0, -999.0]],
                                    [[30.0, 30.0], [40.0, 40.0], [50.0, 50.0]]]]),
        "visibility": torch.tensor([[[2.0, 1.0, 0.0], [2.0, 2.0, 2.0]]]),
    }
    return {
        "kpts": kpts,
        "kpt_sigma": sigma,
        "fg": torch.tensor([[True, False, False]]),
        "gt_index": torch.tensor([[0, 1, 1]]),
        "anchors": torch.tensor([[10.0, 20.0], [30.0, 30.0], [50.0, 50.0]]),
        "strides": torch.tensor([8.0, 8.0, 16.0]),
        "targets": targets,
    }


def _call(term: KeypointTerm, case: dict, **override) -> dict[str, torch.Tensor]:
    c = {**case, **override}
    branch = {"kpts": c["kpts"], "kpt_sigma": c["kpt_sigma"]}
    return term(branch, _assignment(c["fg"], c["gt_index"]), c["anchors"], c["strides"], c["targets"])


def test_laplace_nll_hand_case():
    out = _call(KeypointTerm(3, kind="laplace_nll"), _hand_case())
    expected = (0.7 - LN2 + 1.0) / 2.0  # 0.853426
    assert out["kpt"].item() == pytest.approx(expected, abs=1e-6)
    assert out["kpt"].shape == () and out["oks"].shape == () and out["kvis"].shape == ()


def test_visibility_bce_hand_case():
    out = _call(KeypointTerm(3, kind="laplace_nll"), _hand_case())
    assert out["kvis"].item() == pytest.approx(math.log(32.0 / 3.0) / 3.0, abs=1e-6)  # 0.788986
    assert out["kvis"].dtype == torch.float32


def test_visibility_bce_is_a_mean_over_positive_point_pairs():
    """Two positives on GT 0 (visibility 2, 1, 0) with logits 0: every pair costs ln 2, so the mean is ln 2 however
    many pairs; the second positive's logits (ln 3 on its absent point: ln 4) move the mean by (ln 4 - ln 2) / 6."""
    case = _hand_case()
    kpts = case["kpts"].clone()
    kpts[0, 0, :, 2] = 0.0
    kpts[0, 1, :, 2] = 0.0
    fg, gt_index = torch.tensor([[True, True, False]]), torch.tensor([[0, 0, 1]])
    term = KeypointTerm(3, kind="laplace_nll")
    out = _call(term, case, kpts=kpts, fg=fg, gt_index=gt_index)
    assert out["kvis"].item() == pytest.approx(LN2, abs=1e-6)
    kpts[0, 1, 2, 2] = LN3
    out = _call(term, case, kpts=kpts, fg=fg, gt_index=gt_index)
    assert out["kvis"].item() == pytest.approx(LN2 + (math.log(4.0) - LN2) / 6.0, abs=1e-6)


def test_rle_is_laplace_minus_mean_flow_log_density():
    case = _hand_case()
    rle = _randomise_flow(KeypointTerm(3, kind="rle"))
    lap = KeypointTerm(3, kind="laplace_nll")
    r = torch.tensor([[0.4, -0.3], [0.0, 1.0]])  # the hand residuals of the two visible points
    with torch.no_grad():
        log_g = rle.flow.log_prob(r)
    assert log_g.abs().min() > 0.1  # the flow term is not negligible here
    expected = _call(lap, case)["kpt"] - log_g.mean()
    torch.testing.assert_close(_call(rle, case)["kpt"], expected, atol=1e-5, rtol=1e-6)


def test_rle_at_init_adds_the_standard_normal_term():
    """Identity flow at init: log G(r) = -|r|^2 / 2 - ln(2 pi)."""
    out = _call(KeypointTerm(3, kind="rle"), _hand_case())
    log_g = [-(0.4**2 + 0.3**2) / 2 - math.log(2 * math.pi), -(1.0**2) / 2 - math.log(2 * math.pi)]
    expected = (0.7 - LN2 + 1.0 - sum(log_g)) / 2.0
    assert out["kpt"].item() == pytest.approx(expected, abs=1e-5)


def test_oks_hand_case():
    """area = 40 * 20 = 800; point 0: d^2 = 4^2 + 3^2 = 25, sigma 0.05 -> exp(-25 / (2 * 800 * 0.1^2)) = exp(-25/16);
    point 1: d^2 = 10^2, sigma 0.125 -> exp(-100 / (2 * 800 * 0.25^2)) = exp(-1); point 2 absent."""
    term = KeypointTerm(3, kind="laplace_nll", sigmas=[0.05, 0.125, 0.3])
    out = _call(term, _hand_case())
    expected = 1.0 - (math.exp(-25.0 / 16.0) + math.exp(-1.0)) / 2.0  # 0.711255
    assert out["oks"].item() == pytest.approx(expected, abs=1e-6)


def test_oks_is_zero_for_a_perfect_prediction():
    case = _hand_case()
    gt = case["targets"]["keypoints"][0, 0]  # (K, 2)
    kpts = case["kpts"].clone()
    kpts[0, 0, :, :2] = (gt - case["anchors"][0]) / case["strides"][0]
    out = _call(KeypointTerm(3), case, kpts=kpts)
    assert out["oks"].item() == pytest.approx(0.0, abs=1e-7)


def test_invisible_points_do_not_matter():
    case = _hand_case()
    term = _randomise_flow(KeypointTerm(3, kind="rle"))
    base = _call(term, case)
    for garbage in (1e6, float("nan"), -3.0):
        targets = {k: v.clone() for k, v in case["targets"].items()}
        targets["keypoints"][0, 0, 2] = garbage
        kpts = case["kpts"].clone().requires_grad_()
        sigma = case["kpt_sigma"].clone().requires_grad_()
        out = _call(term, case, targets=targets, kpts=kpts, kpt_sigma=sigma)
        torch.testing.assert_close(out["kpt"], base["kpt"], atol=0, rtol=0)
        torch.testing.assert_close(out["oks"], base["oks"], atol=0, rtol=0)
        torch.testing.assert_close(out["kvis"], base["kvis"], atol=0, rtol=0)
        (out["kpt"] + out["oks"] + out["kvis"]).backward()
        assert torch.isfinite(kpts.grad).all() and torch.isfinite(sigma.grad).all()
        assert kpts.grad[0, 0, 2, :2].abs().sum() == 0 and sigma.grad[0, 0, 2].abs().sum() == 0
        # an absent point is still a visibility target (0): its logit is trained towards "absent"
        assert kpts.grad[0, 0, 2, 2] > 0


def test_background_anchors_do_not_matter():
    case = _hand_case()
    term = _randomise_flow(KeypointTerm(3, kind="rle"))
    base = _call(term, case)
    kpts = case["kpts"].clone()
    kpts[0, 1:] += 100.0
    sigma = case["kpt_sigma"].clone()
    sigma[0, 1:] = -7.0
    kpts.requires_grad_()
    sigma.requires_grad_()
    out = _call(term, case, kpts=kpts, kpt_sigma=sigma, gt_index=torch.tensor([[0, 0, 0]]))
    torch.testing.assert_close(out["kpt"], base["kpt"], atol=0, rtol=0)
    torch.testing.assert_close(out["oks"], base["oks"], atol=0, rtol=0)
    torch.testing.assert_close(out["kvis"], base["kvis"], atol=0, rtol=0)
    (out["kpt"] + out["oks"] + out["kvis"]).backward()
    assert kpts.grad[0, 1:].abs().sum() == 0 and sigma.grad[0, 1:].abs().sum() == 0


def test_box_sides_are_floored_at_one_pixel():
    case = _hand_case()
    term = KeypointTerm(3, kind="laplace_nll")

    def with_box(box):
        targets = {k: v.clone() for k, v in case["targets"].items()}
        targets["boxes"][0, 0] = torch.tensor(box)
        return _call(term, case, targets=targets)

    thin, one, two = with_box([5.0, 0.0, 5.25, 20.0]), with_box([5.0, 0.0, 6.0, 20.0]), with_box([5.0, 0.0, 7.0, 20.0])
    torch.testing.assert_close(thin["kpt"], one["kpt"])
    torch.testing.assert_close(thin["oks"], one["oks"])
    assert abs(two["kpt"].item() - one["kpt"].item()) > 1e-3
    # w = 1: r_x of point 0 = 4 / 1 / 0.25 = 16, so L_0 = 16 + 0.3 - ln 2.
    assert one["kpt"].item() == pytest.approx((16.0 + 0.3 - LN2 + 1.0) / 2.0, abs=1e-5)


def _random_case(seed: int = 0, batch: int = 2, anchors: int = 20, slots: int = 3, k: int = 4) -> dict:
    g = torch.Generator().manual_seed(seed)
    lo = torch.rand(batch, slots, 2, generator=g) * 100
    side = torch.rand(batch, slots, 2, generator=g) * 60 + 0.2  # some sides below the 1 px floor
    side[0, 0, 0] = 0.3
    boxes = torch.cat([lo, lo + side], -1)
    keypoints = lo[:, :, None] + torch.rand(batch, slots, k, 2, generator=g) * side[:, :, None]
    visibility = torch.randint(0, 3, (batch, slots, k), generator=g).float()
    visibility[1, 2] = 0.0  # a GT with no visible point
    fg = torch.rand(batch, anchors, generator=g) < 0.5
    fg[1, :3] = True
    gt_index = torch.randint(0, slots, (batch, anchors), generator=g)
    gt_index[1, 2] = 2
    return {
        "kpts": torch.randn(batch, anchors, k, 3, generator=g),
        "kpt_sigma": torch.randn(batch, anchors, k, 2, generator=g),
        "fg": fg,
        "gt_index": gt_index,
        "anchors": torch.rand(anchors, 2, generator=g) * 120,
        "strides": torch.tensor([8.0, 16.0, 32.0, 8.0, 16.0] * (anchors // 5)),
        "targets": {"boxes": boxes, "keypoints": keypoints, "visibility": visibility},
        "sigmas": (torch.rand(k, generator=g) * 0.1 + 0.02).tolist(),
    }


def _softplus(x: float) -> float:
    return math.log1p(math.exp(-abs(x))) + max(x, 0.0)


def _loop_reference(case: dict, flow: RealNVP2D | None, sigmas: list[float]) -> tuple[float, float, float]:
    t = case["targets"]
    total, pairs, oks_total, oks_count = 0.0, 0, 0.0, 0
    bce_total, bce_pairs = 0.0, 0
    batch, num_anchors = case["fg"].shape
    for b in range(batch):
        for a in range(num_anchors):
            if not case["fg"][b, a]:
                continue
            g = int(case["gt_index"][b, a])
            x1, y1, x2, y2 = t["boxes"][b, g].tolist()
            w, h = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
            stride = float(case["strides"][a])
            ax, ay = case["anchors"][a].tolist()
            oks_sum, num_visible = 0.0, 0
            for j in range(case["kpts"].shape[2]):
                logit = float(case["kpts"][b, a, j, 2])  # BCE = softplus(-l) for a labelled point, softplus(l) else
                bce_total += _softplus(-logit) if float(t["visibility"][b, g, j]) > 0 else _softplus(logit)
                bce_pairs += 1
                if float(t["visibility"][b, g, j]) == 0.0:
                    continue
                px = ax + float(case["kpts"][b, a, j, 0]) * stride
                py = ay + float(case["kpts"][b, a, j, 1]) * stride
                gx, gy = t["keypoints"][b, g, j].tolist()
                sx = 1.0 / (1.0 + math.exp(-float(case["kpt_sigma"][b, a, j, 0])))
                sy = 1.0 / (1.0 + math.exp(-float(case["kpt_sigma"][b, a, j, 1])))
                rx, ry = (gx - px) / w / sx, (gy - py) / h / sy
                loss = abs(rx) + LN2 + math.log(sx) + abs(ry) + LN2 + math.log(sy)
                if flow is not None:
                    with torch.no_grad():
                        loss -= float(flow.log_prob(torch.tensor([[rx, ry]], dtype=torch.float32))[0])
                total += loss
                pairs += 1
                d2 = (px - gx) ** 2 + (py - gy) ** 2
                oks_sum += math.exp(-d2 / (2.0 * w * h * (2.0 * sigmas[j]) ** 2))
                num_visible += 1
            if num_visible:
                oks_total += 1.0 - oks_sum / num_visible
                oks_count += 1
    return total / max(pairs, 1), oks_total / max(oks_count, 1), bce_total / max(bce_pairs, 1)


@pytest.mark.parametrize("kind", ["rle", "laplace_nll"])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_loop_reference(kind, seed):
    case = _random_case(seed)
    term = KeypointTerm(4, kind=kind, sigmas=case["sigmas"])
    if kind == "rle":
        _randomise_flow(term, seed)
    out = _call(term, case)
    kpt, oks, kvis = _loop_reference(case, term.flow, case["sigmas"])
    assert out["kpt"].item() == pytest.approx(kpt, rel=1e-4, abs=1e-4)
    assert out["oks"].item() == pytest.approx(oks, rel=1e-4, abs=1e-5)
    assert out["kvis"].item() == pytest.approx(kvis, rel=1e-5, abs=1e-6)
    assert 0.0 < oks < 1.0


def test_gradients_reach_kpts_sigma_and_flow():
    case = _random_case(3)
    term = _randomise_flow(KeypointTerm(4, kind="rle"), 3)
    kpts = case["kpts"].clone().requires_grad_()
    sigma = case["kpt_sigma"].clone().requires_grad_()
    out = _call(term, case, kpts=kpts, kpt_sigma=sigma)
    (out["kpt"] + out["oks"] + out["kvis"]).backward()
    assert kpts.grad[..., 2][case["fg"]].abs().min() > 0  # every positive's visibility logits
    for name, grad in (("kpts", kpts.grad), ("kpt_sigma", sigma.grad)):
        assert grad is not None and torch.isfinite(grad).all(), name
        assert grad[case["fg"]].abs().sum() > 0, name
        assert grad[~case["fg"]].abs().sum() == 0, name
    for name, p in term.flow.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("kind", ["rle", "laplace_nll"])
def test_zero_positives_give_differentiable_zeros(kind):
    case = _hand_case()
    term = KeypointTerm(3, kind=kind)
    kpts = case["kpts"].clone().requires_grad_()
    sigma = case["kpt_sigma"].clone().requires_grad_()
    out = _call(term, case, kpts=kpts, kpt_sigma=sigma, fg=torch.zeros(1, 3, dtype=torch.bool))
    assert out["kpt"].item() == 0.0 and out["oks"].item() == 0.0 and out["kvis"].item() == 0.0
    assert out["kpt"].requires_grad and out["oks"].requires_grad and out["kvis"].requires_grad
    (out["kpt"] + out["oks"] + out["kvis"]).backward()
    assert kpts.grad is not None and kpts.grad.abs().sum() == 0
    assert sigma.grad is not None and sigma.grad.abs().sum() == 0


def test_positives_without_visible_points_give_zeros():
    case = _hand_case()
    targets = {**case["targets"], "visibility": torch.zeros(1, 2, 3)}
    out = _call(KeypointTerm(3), case, targets=targets)
    assert out["kpt"].item() == 0.0 and out["oks"].item() == 0.0
    # every point a visibility target 0: logits (0, ln 3, ln 3) cost (ln 2 + ln 4 + ln 4) / 3 = 5 ln 2 / 3
    assert out["kvis"].item() == pytest.approx(5.0 * LN2 / 3.0, abs=1e-6)


class _Float64Spy(TorchDispatchMode):
    """Records every dtype an op produces while active."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.dtypes.add(t.dtype)
        return out


@pytest.mark.parametrize("kind", ["rle", "laplace_nll"])
def test_float32_only(kind):
    case = _random_case(2)
    term = _randomise_flow(KeypointTerm(4, kind=kind)) if kind == "rle" else KeypointTerm(4, kind=kind)
    kpts = case["kpts"].clone().requires_grad_()
    with _Float64Spy() as spy:
        out = _call(term, case, kpts=kpts)
        (out["kpt"] + out["oks"] + out["kvis"]).backward()
    assert out["kpt"].dtype == torch.float32 and out["oks"].dtype == torch.float32 and out["kvis"].dtype == torch.float32
    assert torch.float32 in spy.dtypes
    assert torch.float64 not in spy.dtypes, spy.dtypes


def test_half_precision_inputs_under_autocast_give_float32():
    case = _random_case(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _call(KeypointTerm(4), case, kpts=case["kpts"].bfloat16(), kpt_sigma=case["kpt_sigma"].bfloat16())
    assert out["kpt"].dtype == torch.float32 and out["oks"].dtype == torch.float32
    assert out["kvis"].dtype == torch.float32
    assert torch.isfinite(out["kpt"]) and torch.isfinite(out["oks"]) and torch.isfinite(out["kvis"])


def test_configuration():
    rle = KeypointTerm(5)
    lap = KeypointTerm(5, kind="laplace_nll", keypoint_gain=2.0, oks_gain=0.5, visibility_gain=0.25)
    assert rle.gains == {"kpt": 1.0, "oks": 0.0, "kvis": 1.0} and lap.gains == {"kpt": 2.0, "oks": 0.5, "kvis": 0.25}
    torch.testing.assert_close(rle.oks_sigmas, torch.full((5,), 0.072))
    assert sum(isinstance(m, RealNVP2D) for m in rle.modules()) == 1
    assert sum(isinstance(m, RealNVP2D) for m in lap.modules()) == 0
    assert "oks_sigmas" not in rle.state_dict()
    with pytest.raises(ValueError, match="unknown keypoint loss"):
        KeypointTerm(5, kind="l1")
    with pytest.raises(ValueError, match="OKS sigmas"):
        KeypointTerm(5, sigmas=[0.1] * 4)


def test_one_flow_shared_by_both_branches_in_the_criterion():
    """In the criterion the term runs for o2m and o2o; the single flow gets gradient from both."""
    g = torch.Generator().manual_seed(0)
    anchors, strides = make_anchors([(8, 8), (4, 4)], [8, 16])
    a, k = anchors.shape[0], 3
    targets = {
        "boxes": torch.tensor([[[8.0, 8.0, 40.0, 48.0], [30.0, 10.0, 60.0, 30.0]]]),
        "labels": torch.tensor([[0, 1]]),
        "mask": torch.tensor([[True, True]]),
        "keypoints": torch.tensor([[[[20.0, 20.0], [30.0, 40.0], [10.0, 10.0]],
                                    [[40.0, 20.0], [50.0, 25.0], [35.0, 15.0]]]]),
        "visibility": torch.tensor([[[2.0, 1.0, 0.0], [2.0, 2.0, 2.0]]]),
    }

    def branch() -> dict:
        return {
            "boxes": torch.rand(1, a, 4, generator=g) * 2 + 0.5,
            "logits": torch.randn(1, a, 2, generator=g) - 3,
            "kpts": torch.randn(1, a, k, 3, generator=g).requires_grad_(),
            "kpt_sigma": torch.randn(1, a, k, 2, generator=g).requires_grad_(),
        }

    outputs = {"o2m": branch(), "o2o": branch(), "anchors": anchors, "strides": strides}
    term = _randomise_flow(KeypointTerm(k, kind="rle", oks_gain=0.5))
    criterion = DetectionCriterion(branch_terms=[term])
    assert sum(isinstance(m, RealNVP2D) for m in criterion.modules()) == 1
    total, terms = criterion(outputs, targets, 0.7)
    for key in ("o2m/kpt", "o2o/kpt", "o2m/oks", "o2o/oks", "o2m/kvis", "o2o/kvis", "kpt", "oks", "kvis"):
        assert torch.isfinite(terms[key]), key
    assert terms["o2m/kpt"] != terms["o2o/kpt"]

    # The flow's gradient is the alpha-mix of both branches' contributions.
    flow_params = list(term.flow.parameters())
    mixed = torch.autograd.grad(total, flow_params, retain_graph=True)
    from_o2m = torch.autograd.grad(terms["o2m/kpt"], flow_params, retain_graph=True)
    from_o2o = torch.autograd.grad(terms["o2o/kpt"], flow_params, retain_graph=True)
    for gm, g1, g2 in zip(mixed, from_o2m, from_o2o, strict=True):
        torch.testing.assert_close(gm, 0.7 * g1 + 0.3 * g2, atol=1e-5, rtol=1e-4)
    assert all(g.abs().sum() > 0 for g in from_o2o)


def test_a_given_flow_is_the_terms_own():
    """The task hands the model's flow (``model.aux["flow"]``) to the term: one module, trained once."""
    flow = RealNVP2D()
    term = KeypointTerm(3, flow=flow)
    assert term.flow is flow
    assert KeypointTerm(3, kind="laplace_nll", flow=flow).flow is None  # the control arm has no flow


def test_the_task_criterion_reads_the_models_flow():
    from lucidyolo.tasks.registry import get_task

    spec = get_task("keypoints")
    cfg = spec.config_model(variant="n")
    model = spec.build_model(cfg=cfg, num_classes=1, meta={"num_keypoints": 3})
    criterion = spec.build_criterion(cfg=cfg, num_classes=1, meta={"num_keypoints": 3}, model=model)
    flows = [m for m in criterion.modules() if isinstance(m, RealNVP2D)]
    assert flows and all(f is model.aux["flow"] for f in flows)
