"""ProbIoU: hand-derived Bhattacharyya distances and the invariances the rotated loss relies on."""

from __future__ import annotations

import math

import torch

from lucidyolo.structures.probiou import bhattacharyya, hellinger, probiou


def _rb(*v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float32)


def test_identical_boxes_have_probiou_one():
    a = _rb(10, 20, 30, 8, 0.4)
    assert float(bhattacharyya(a, a)) < 1e-6
    assert abs(float(probiou(a, a)) - 1.0) < 1e-3


def test_offset_axis_aligned_squares_match_the_closed_form():
    # Equal covariances diag(w^2/12, h^2/12): the log term vanishes and
    # B = dx^2 / (8 w^2 / 12) = 1.5 dx^2 / w^2; w = 2, dx = 1 -> B = 0.375.
    a, b = _rb(0, 0, 2, 2, 0.0), _rb(1, 0, 2, 2, 0.0)
    assert math.isclose(float(bhattacharyya(a, b)), 0.375, rel_tol=1e-5)
    expected = 1.0 - math.sqrt(1.0 - math.exp(-0.375))
    assert math.isclose(float(probiou(a, b)), expected, abs_tol=1e-5)


def test_concentric_boxes_of_different_size_match_the_closed_form():
    # Same centre and axes, sides (2, 2) and (4, 4): S1 = I/3, S2 = 4I/3, S = 5I/6,
    # B = 1/2 ln(det S / sqrt(det S1 det S2)) = 1/2 ln((25/36) / (4/9)) = 1/2 ln(25/16).
    a, b = _rb(0, 0, 2, 2, 0.0), _rb(0, 0, 4, 4, 0.0)
    assert math.isclose(float(bhattacharyya(a, b)), 0.5 * math.log(25 / 16), rel_tol=1e-5)


def test_invariant_to_half_turns_side_swaps_and_a_common_rotation():
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.rand(64, 2, generator=g) * 100, torch.rand(64, 2, generator=g) * 50 + 2,
                   torch.rand(64, 1, generator=g) * 6 - 3], -1)
    b = a + torch.randn(64, 5, generator=g) * torch.tensor([5, 5, 3, 3, 0.3])
    b[:, 2:4] = b[:, 2:4].abs() + 1
    ref = probiou(a, b)
    half = b.clone()
    half[:, 4] += math.pi
    swapped = b[:, [0, 1, 3, 2, 4]].clone()
    swapped[:, 4] += math.pi / 2
    assert torch.allclose(probiou(a, half), ref, atol=1e-5)
    assert torch.allclose(probiou(a, swapped), ref, atol=1e-5)
    # Rotating both boxes about the origin by phi changes nothing.
    phi = 0.7
    rot = torch.tensor([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])

    def turn(r: torch.Tensor) -> torch.Tensor:
        out = r.clone()
        out[:, :2] = r[:, :2] @ rot.T
        out[:, 4] += phi
        return out

    assert torch.allclose(probiou(turn(a), turn(b)), ref, atol=1e-4)


def test_degenerate_boxes_stay_finite_with_gradients():
    a = _rb(0, 0, 0, 0, 0.0).requires_grad_()
    b = _rb(3, 1, 10, 5, 0.2)
    loss = hellinger(a, b)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(a.grad).all()
    assert 0.0 <= float(loss.detach()) <= 1.0
    # A perfect match keeps a finite gradient too.
    c = _rb(3, 1, 10, 5, 0.2).requires_grad_()
    hellinger(c, b).backward()
    assert torch.isfinite(c.grad).all()


def test_broadcasts_like_the_assigner_calls_it():
    gt = torch.rand(2, 3, 1, 5) + 1
    pred = torch.rand(2, 1, 7, 5) + 1
    assert probiou(gt, pred).shape == (2, 3, 7)
