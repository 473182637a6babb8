"""RealNVP2D: a normalised density (grid integration), the change of variables (autograd Jacobian), structure."""

from __future__ import annotations

import math

import pytest
import torch

from lucidyolo.tasks.keypoints.realnvp import RealNVP2D


def _randomised(seed: int = 0, std: float = 0.2) -> RealNVP2D:
    """A flow far from the identity (every parameter drawn from N(0, std))."""
    torch.manual_seed(seed)
    flow = RealNVP2D()
    with torch.no_grad():
        for p in flow.parameters():
            p.normal_(0.0, std)
    return flow


def _std_normal_log_prob(x: torch.Tensor) -> torch.Tensor:
    return -0.5 * (x * x).sum(-1) - math.log(2.0 * math.pi)


def _grid_integral(flow: RealNVP2D, lim: float = 8.0, n: int = 241) -> float:
    """Midpoint-rule integral of exp(log_prob) over [-lim, lim]^2 (the mass outside is negligible here)."""
    xs = torch.linspace(-lim, lim, n)
    step = float(xs[1] - xs[0])
    grid = torch.stack(torch.meshgrid(xs, xs, indexing="ij"), -1).reshape(-1, 2)
    with torch.no_grad():
        density = flow.log_prob(grid).exp()
    border = density.reshape(n, n)
    edge = torch.cat([border[0], border[-1], border[:, 0], border[:, -1]]).max()
    assert edge < 1e-6, "grid too small: mass at its edge"
    return float(density.sum()) * step * step


def test_identity_at_init_is_standard_normal():
    flow = RealNVP2D()
    x = torch.tensor([[0.0, 0.0], [1.0, -2.0], [-0.3, 0.7], [3.0, 3.0]])
    # log N(0; 0, I_2) = -log(2 pi) = -1.837877
    torch.testing.assert_close(flow.log_prob(x)[0], torch.tensor(-1.8378771), atol=1e-6, rtol=0)
    torch.testing.assert_close(flow.log_prob(x), _std_normal_log_prob(x), atol=1e-6, rtol=0)


@pytest.mark.parametrize("randomise", [False, True], ids=["init", "random"])
def test_density_integrates_to_one(randomise):
    flow = _randomised() if randomise else RealNVP2D()
    assert _grid_integral(flow) == pytest.approx(1.0, abs=1e-3)


def test_randomised_flow_is_not_gaussian():
    """Guards the integration test above: the randomised flow is far from its base."""
    flow = _randomised()
    x = torch.tensor([[0.0, 0.0], [1.0, -1.0], [-1.5, 0.5], [2.0, 1.0]])
    with torch.no_grad():
        diff = (flow.log_prob(x) - _std_normal_log_prob(x)).abs()
    assert diff.max() > 0.2


def test_log_prob_is_change_of_variables_with_autograd_jacobian():
    flow = _randomised(seed=3)
    points = torch.tensor([[0.0, 0.0], [0.5, -1.2], [-2.0, 0.3], [1.7, 2.2], [-0.4, -3.0]])
    with torch.no_grad():
        got = flow.log_prob(points)
    for i, x in enumerate(points):
        z = flow.to_base(x[None])[0][0]
        jac = torch.autograd.functional.jacobian(lambda p: flow.to_base(p[None])[0][0], x)  # (2, 2)
        expected = _std_normal_log_prob(z.detach()) + torch.linalg.slogdet(jac)[1]
        torch.testing.assert_close(got[i], expected, atol=1e-4, rtol=1e-5)


def test_coupling_jacobians_are_triangular_and_bounded():
    """Each layer only rescales the non-kept coordinate, by at most exp(|scale|)."""
    flow = _randomised(seed=5, std=1.0)
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(0)) * 3
    for i, layer in enumerate(flow.layers):
        kept = i % 2  # masks [1, 0], [0, 1], ...
        assert layer.kept == kept
        z, log_det = layer.to_base(x)
        torch.testing.assert_close(z[:, kept], x[:, kept], atol=0, rtol=0)
        assert (log_det.abs() <= layer.scale.abs() + 1e-6).all()
        x = z


def test_structure():
    flow = RealNVP2D()
    assert len(flow.layers) == 6
    for layer in flow.layers:
        linears = [m for m in layer.net if isinstance(m, torch.nn.Linear)]
        assert [(m.in_features, m.out_features) for m in linears] == [(1, 64), (64, 64), (64, 2)]


def test_empty_batch_and_backward():
    flow = _randomised()
    x = torch.zeros(0, 2, requires_grad=True)
    out = flow.log_prob(x)
    assert out.shape == (0,) and out.dtype == torch.float32
    out.sum().backward()
    assert x.grad is not None and x.grad.shape == (0, 2)


def test_float32_in_float32_out_and_grads_reach_every_parameter():
    flow = _randomised()
    x = torch.randn(16, 2, generator=torch.Generator().manual_seed(1))
    out = flow.log_prob(x)
    assert out.dtype == torch.float32
    out.sum().backward()
    for name, p in flow.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name
