"""A small RealNVP normalising flow over R^2: the learned residual density of the pose term.

Spec (30-objective.md, pose): "G a small RealNVP flow over R^2 (6 affine coupling
layers, conditioner 3 layers of 64 units, log-scale = learned scale * tanh)".

The flow is a bijection ``f = f_L o ... o f_1`` from data ``x`` to base ``z``, with
``z ~ N(0, I_2)``. Each coupling layer keeps one coordinate (``x_c``, the mask's 1)
and transforms the other (``x_t``) affinely with a scale and shift that depend on
``x_c`` only::

    (s_raw, t) = MLP(x_c)                       # Linear(1,64)-SiLU-Linear(64,64)-SiLU-Linear(64,2)
    s          = scale * tanh(s_raw)            # bounded log-scale, scale a learned scalar
    z_c        = x_c
    z_t        = (x_t - t) * exp(-s)            # log|det dz/dx| = -s

The masks alternate ``[1, 0], [0, 1], ...`` so each coordinate is transformed by
every other layer. By the change of variables::

    log G(x) = log N(f(x); 0, I) + sum_layers (-s_layer(x))

The conditioners' last layers start at zero (``s_raw = t = 0``): at initialisation
the flow is exactly the identity and ``G`` the standard normal. ``scale`` starts at 1
so the log-scale path has a gradient from the first step (with both at zero it would
have none).

Shapes: :meth:`RealNVP2D.log_prob` maps ``(N, 2) -> (N,)``; ``N = 0`` works.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

_LOG_2PI = math.log(2.0 * math.pi)


class _Coupling(nn.Module):
    """One affine coupling layer: ``kept`` conditions the affine map of the other coordinate."""

    def __init__(self, kept: int, hidden: int) -> None:
        super().__init__()
        self.kept = int(kept)
        self.net = nn.Sequential(
            nn.Linear(1, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 2)
        )
        # Zero last layer: the layer starts as the identity (s = t = 0).
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)
        self.scale = nn.Parameter(torch.ones(()))

    def extra_repr(self) -> str:
        return f"kept={self.kept}"

    def to_base(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(N, 2) -> ((N, 2), (N,))``: the layer's image (towards the base) and ``log|det|`` of that map."""
        kept = x[:, self.kept : self.kept + 1]  # (N, 1)
        moved = x[:, 1 - self.kept : 2 - self.kept]
        s_raw, t = self.net(kept).unbind(-1)  # (N,) each
        s = self.scale * torch.tanh(s_raw)
        moved = (moved[:, 0] - t) * torch.exp(-s)
        z = torch.stack([kept[:, 0], moved] if self.kept == 0 else [moved, kept[:, 0]], -1)
        return z, -s


class RealNVP2D(nn.Module):
    """RealNVP density over R^2 with a standard-normal base (see the module doc).

    Args:
        num_layers: affine coupling layers (6 in the spec), masks alternating ``[1, 0]``, ``[0, 1]``.
        hidden: conditioner width (64 in the spec).
    """

    def __init__(self, num_layers: int = 6, hidden: int = 64) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Coupling(kept=i % 2, hidden=hidden) for i in range(num_layers))

    def to_base(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Data to base: ``x (N, 2) -> (z (N, 2), log|det dz/dx| (N,))``."""
        log_det = x.new_zeros(x.shape[:1])
        z = x
        for layer in self.layers:
            z, ld = layer.to_base(z)
            log_det = log_det + ld
        return z, log_det

    def log_prob(self, x: Tensor) -> Tensor:
        """``log G(x)``: ``x (N, 2)`` -> ``(N,)`` log density under the flow (``N = 0`` gives ``(0,)``)."""
        z, log_det = self.to_base(x)
        return log_det - 0.5 * (z * z).sum(-1) - _LOG_2PI

    def forward(self, x: Tensor) -> Tensor:
        """Same as :meth:`log_prob`."""
        return self.log_prob(x)
