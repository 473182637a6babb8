"""RealNVP2D: a normalised density (grid integration), the change of variables (autograd Jacobian and explicit
formulas), the layer order, the published structure."""

from __future__ import annotations

import math

import pytest
import torch

from lucidyolo.tasks.keypoints.realnvp import RealNVP2D


def _randomised(seed: int = 0, std: float = 0.2, base: bool = False) -> RealNVP2D:
    """A flow far from the identity (every parameter drawn from N(0, std)); ``base``: a non-standard Gaussian base."""
    torch.manual_seed(seed)
    flow = RealNVP2D()
    with torch.no_grad():
        for p in flow.parameters():
            p.normal_(0.0, std)
        if base:
            flow.loc.copy_(torch.tensor(LOC))
            flow.cov.copy_(torch.tensor(COV))
    return flow


LOC = (0.4, -0.7)
COV = ((1.5, 0.3), (0.3, 0.6))


def _gaussian_log_prob(z: torch.Tensor, loc=LOC, cov=COV) -> torch.Tensor:
    """log N(z; loc, cov) written out for 2 x 2: -log(2 pi) - log(det)/2 - q/2, q with the explicit inverse."""
    (a, b), (c, d) = cov
    det = a * d - b * c
    dx, dy = z[..., 0] - loc[0], z[..., 1] - loc[1]
    q = (d * dx * dx - (b + c) * dx * dy + a * dy * dy) / det
    return -math.log(2.0 * math.pi) - 0.5 * math.log(det) - 0.5 * q


def _std_normal_log_prob(x: torch.Tensor) -> torch.Tensor:
    return -0.5 * (x * x).sum(-1) - math.log(2.0 * math.pi)


def _grid_integral(flow: RealNVP2D, lim: float = 12.0, n: int = 361) -> float:
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


@pytest.mark.parametrize("kind", ["init", "random", "random_base"])
def test_density_integrates_to_one(kind):
    flow = {"init": RealNVP2D, "random": _randomised, "random_base": lambda: _randomised(base=True)}[kind]()
    assert _grid_integral(flow) == pytest.approx(1.0, abs=1e-3)


def test_identity_flow_is_its_gaussian_base():
    """The base is N(loc, cov) from the buffers (the published flow's); at init the flow maps x to itself."""
    flow = RealNVP2D()
    with torch.no_grad():
        flow.loc.copy_(torch.tensor(LOC))
        flow.cov.copy_(torch.tensor(COV))
    x = torch.tensor([[0.0, 0.0], [0.4, -0.7], [2.0, 1.0], [-1.0, 3.0]])
    torch.testing.assert_close(flow.log_prob(x), _gaussian_log_prob(x), atol=1e-5, rtol=0)
    # at the mean: -log(2 pi) - log(0.9 - 0.09) / 2
    torch.testing.assert_close(flow.log_prob(x)[1], torch.tensor(-math.log(2 * math.pi) - 0.5 * math.log(0.81)))


def test_randomised_flow_is_not_gaussian():
    """Guards the integration test above: the randomised flow is far from its base."""
    flow = _randomised()
    x = torch.tensor([[0.0, 0.0], [1.0, -1.0], [-1.5, 0.5], [2.0, 1.0]])
    with torch.no_grad():
        diff = (flow.log_prob(x) - _std_normal_log_prob(x)).abs()
    assert diff.max() > 0.2


@pytest.mark.parametrize("base", [False, True], ids=["standard", "loc_cov"])
def test_log_prob_is_change_of_variables_with_autograd_jacobian(base):
    flow = _randomised(seed=3, base=base)
    points = torch.tensor([[0.0, 0.0], [0.5, -1.2], [-2.0, 0.3], [1.7, 2.2], [-0.4, -3.0]])
    with torch.no_grad():
        got = flow.log_prob(points)
    for i, x in enumerate(points):
        z = flow.to_base(x[None])[0][0]
        jac = torch.autograd.functional.jacobian(lambda p: flow.to_base(p[None])[0][0], x)  # (2, 2)
        base_lp = _gaussian_log_prob(z.detach()) if base else _std_normal_log_prob(z.detach())
        torch.testing.assert_close(got[i], base_lp + torch.linalg.slogdet(jac)[1], atol=1e-4, rtol=1e-5)


def _constant_nets(flow: RealNVP2D, layer: int, s: tuple[float, float], t: tuple[float, float]) -> None:
    """Make layer ``layer``'s nets constant: s-net = tanh(s), t-net = t (last linear layer's bias only)."""
    with torch.no_grad():
        flow.s[layer][4].bias.copy_(torch.tensor(s))
        flow.t[layer][4].bias.copy_(torch.tensor(t))


def test_one_coupling_layer_explicitly():
    """One layer, mask [0, 1] (keeps y): z = ((x - t_x) exp(-tanh s_x), y); the y outputs of the nets are masked
    out, log G = log N(z) - tanh(s_x)."""
    flow = RealNVP2D(num_layers=1)
    assert flow.mask.tolist() == [[0.0, 1.0]]
    _constant_nets(flow, 0, s=(0.8, 5.0), t=(1.5, -9.0))
    x = torch.tensor([[2.0, -1.0], [0.0, 3.0]])
    with torch.no_grad():
        z, log_det = flow.to_base(x)
        got = flow.log_prob(x)
    scale = math.exp(-math.tanh(0.8))
    expected_z = torch.tensor([[(2.0 - 1.5) * scale, -1.0], [(0.0 - 1.5) * scale, 3.0]])
    torch.testing.assert_close(z, expected_z)
    torch.testing.assert_close(log_det, torch.full((2,), -math.tanh(0.8)))
    torch.testing.assert_close(got, _std_normal_log_prob(expected_z) - math.tanh(0.8))


def test_data_to_base_runs_the_layers_last_to_first():
    """The generative direction z -> x runs the layers first to last (the published flow's order):
    layer i with mask m maps x -> m x + (1 - m) (x exp(s) + t). Written out here, it must invert to_base."""
    flow = _randomised(seed=7, std=0.3)
    z = torch.randn(32, 2, generator=torch.Generator().manual_seed(2))
    x = z.clone()
    with torch.no_grad():
        for i in range(len(flow.s)):
            m = flow.mask[i]
            kept = m * x
            s = flow.s[i](kept) * (1 - m)
            t = flow.t[i](kept) * (1 - m)
            x = kept + (1 - m) * (x * torch.exp(s) + t)
        back, _ = flow.to_base(x)
    torch.testing.assert_close(back, z, atol=1e-5, rtol=1e-5)
    # the other order would not invert it: the layers do not commute here
    with torch.no_grad():
        y = x.clone()
        for i in range(len(flow.s)):
            m = flow.mask[i]
            kept = m * y
            y = kept + (1 - m) * (y - flow.t[i](kept) * (1 - m)) * torch.exp(-flow.s[i](kept) * (1 - m))
    assert (y - z).abs().max() > 1e-2


def test_coupling_layers_keep_their_masked_coordinate_and_bound_the_log_scale():
    """Each layer moves only the coordinate its mask marks 0, by a log-scale in (-1, 1) (the tanh): the total
    log-det of 6 layers stays inside [-6, 6] however large the parameters (float32 tanh saturates at 1)."""
    flow = _randomised(seed=5, std=3.0)
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(0)) * 3
    with torch.no_grad():
        _, log_det = flow.to_base(x)
        assert (log_det.abs() <= 6).all() and log_det.abs().max() > 1  # not trivially small
        for i in reversed(range(len(flow.s))):
            single = RealNVP2D(num_layers=1)
            single.s[0].load_state_dict(flow.s[i].state_dict())
            single.t[0].load_state_dict(flow.t[i].state_dict())
            single.mask.copy_(flow.mask[i : i + 1])
            z, ld = single.to_base(x)
            kept = int(flow.mask[i].argmax())
            torch.testing.assert_close(z[:, kept], x[:, kept], atol=0, rtol=0)
            assert (ld.abs() <= 1).all()
            x = z


def test_structure_is_the_published_flow_model():
    """The published yolo26-pose flow_model: buffers loc (2,) = 0, cov (2, 2) = I, mask (6, 2) alternating
    [0, 1], [1, 0]; per layer s.<i> = Linear(2, 64), SiLU, Linear(64, 64), SiLU, Linear(64, 2), Tanh and t.<i> the
    same without the Tanh."""
    flow = RealNVP2D()
    assert flow.published == "flow_model"
    assert flow.loc.tolist() == [0.0, 0.0] and flow.cov.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert flow.mask.tolist() == [[0.0, 1.0], [1.0, 0.0]] * 3
    assert not any(n in dict(flow.named_parameters()) for n in ("loc", "cov", "mask"))  # fixed, not trained
    expected = {
        f"{net}.{i}.{j}.{p}": shape
        for net in ("s", "t") for i in range(6)
        for j, (w, b) in {0: ((64, 2), (64,)), 2: ((64, 64), (64,)), 4: ((2, 64), (2,))}.items()
        for p, shape in (("weight", w), ("bias", b))
    } | {"loc": (2,), "cov": (2, 2), "mask": (6, 2)}
    assert {k: tuple(v.shape) for k, v in flow.state_dict().items()} == expected
    for i in range(6):
        assert isinstance(flow.s[i][-1], torch.nn.Tanh) and isinstance(flow.t[i][-1], torch.nn.Linear)
        assert [type(m).__name__ for m in flow.s[i]] == ["Linear", "SiLU", "Linear", "SiLU", "Linear", "Tanh"]


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
