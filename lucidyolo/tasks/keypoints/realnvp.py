"""A small RealNVP normalising flow over R^2: the learned residual density of the pose term.

Spec (30-objective.md, pose): "G a small RealNVP flow over R^2 (6 affine coupling
layers, conditioner 3 layers of 64 units)". The module is laid out as the
published YOLO26 pose head's ``flow_model`` (so its weights load one to one):
buffers ``loc (2,)`` and ``cov (2, 2)`` of the Gaussian base and ``mask (L, 2)``
(alternating ``[0, 1]``, ``[1, 0]``: 1 marks the coordinate a layer keeps),
and per layer a scale net ``s[i]`` (Linear(2,64)-SiLU-Linear(64,64)-SiLU-
Linear(64,2)-Tanh) and a shift net ``t[i]`` (the same without the Tanh). The
published layout has no learned scale on the log-scale (the spec's "learned
scale * tanh"); the tanh bounds it to ``(-1, 1)`` per layer (docs/decisions/keypoints.md).

Data ``x`` to base ``z`` runs the layers last to first (the inverse of the
generative direction ``z -> x``, which runs first to last). Layer ``i`` with
mask ``m``::

    kept = m * x
    s = s[i](kept) * (1 - m);  t = t[i](kept) * (1 - m)
    x = kept + (1 - m) * (x - t) * exp(-s)      # log|det dz/dx| += -sum(s)

    log G(x) = log N(z; loc, cov) + sum_layers (-sum(s))

The nets' last linear layers start at zero, so at initialisation the flow is the
identity and ``G`` the base density.

Shapes: :meth:`RealNVP2D.log_prob` maps ``(N, 2) -> (N,)``; ``N = 0`` works.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _net(hidden: int, tanh: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(2, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                               nn.Linear(hidden, 2)]
    if tanh:
        layers.append(nn.Tanh())
    nn.init.zeros_(layers[4].weight)  # identity at initialisation (s = t = 0)
    nn.init.zeros_(layers[4].bias)
    return nn.Sequential(*layers)


class RealNVP2D(nn.Module):
    """RealNVP density over R^2 with a Gaussian base (see the module doc).

    Args:
        num_layers: affine coupling layers (6 in the spec).
        hidden: conditioner width (64 in the spec).
    """

    published = "flow_model"
    """The publisher's name of this module inside its head (its inner names are the publisher's)."""

    def __init__(self, num_layers: int = 6, hidden: int = 64) -> None:
        super().__init__()
        self.register_buffer("loc", torch.zeros(2))
        self.register_buffer("cov", torch.eye(2))
        self.register_buffer("mask", torch.tensor([[0.0, 1.0], [1.0, 0.0]] * (num_layers // 2)
                                                  + [[0.0, 1.0]] * (num_layers % 2)))
        self.s = nn.ModuleList(_net(hidden, tanh=True) for _ in range(num_layers))
        self.t = nn.ModuleList(_net(hidden, tanh=False) for _ in range(num_layers))

    def to_base(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Data to base: ``x (N, 2) -> (z (N, 2), log|det dz/dx| (N,))``."""
        log_det = x.new_zeros(x.shape[:1])
        z = x
        for i in reversed(range(len(self.s))):
            m = self.mask[i].to(z.dtype)
            kept = m * z
            s = self.s[i](kept) * (1 - m)
            t = self.t[i](kept) * (1 - m)
            z = kept + (1 - m) * (z - t) * torch.exp(-s)
            log_det = log_det - s.sum(-1)
        return z, log_det

    def log_prob(self, x: Tensor) -> Tensor:
        """``log G(x)``: ``x (N, 2)`` -> ``(N,)`` log density under the flow (``N = 0`` gives ``(0,)``)."""
        z, log_det = self.to_base(x)
        base = torch.distributions.MultivariateNormal(self.loc.to(z.dtype), self.cov.to(z.dtype), validate_args=False)
        return log_det + base.log_prob(z)

    def forward(self, x: Tensor) -> Tensor:
        """Same as :meth:`log_prob`."""
        return self.log_prob(x)
