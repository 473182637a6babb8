"""ProbIoU (Llerena et al., "Gaussian Bounding Boxes and Probabilistic Intersection-over-Union", 2021).

Each rotated box ``[cx, cy, w, h, theta]`` is the Gaussian of a uniform
density on the rectangle: mean the centre, covariance ``R diag(w^2/12, h^2/12) R^T``.
Two Gaussians are compared by the Bhattacharyya distance

    B = 1/8 d^T S^-1 d + 1/2 ln(det S / sqrt(det S1 det S2)),  S = (S1 + S2) / 2,

and ``ProbIoU = 1 - H`` with the Hellinger distance ``H = sqrt(1 - exp(-B))``.
It is smooth, invariant to ``theta + pi`` and to ``(w, h, theta) ->
(h, w, theta + pi/2)`` (the covariance does not change), so it needs no
canonical form and no angle wrapping: the rotated task's box loss
(``1 - ProbIoU = H``) and the alignment of its assigner. Sides are floored at
``1e-4`` px so a collapsed prediction keeps a finite, invertible covariance.
"""

from __future__ import annotations

from torch import Tensor

MIN_SIDE = 1e-4
"""Sides are floored here before the covariance is formed (spec 30-objective)."""

_EPS = 1e-7


def _covariance(rboxes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(..., 5)`` -> ``(a, b, c)`` each ``(...)``: the covariance ``[[a, c], [c, b]]``."""
    w = rboxes[..., 2].clamp(min=MIN_SIDE)
    h = rboxes[..., 3].clamp(min=MIN_SIDE)
    var_w, var_h = w.square() / 12, h.square() / 12
    cos, sin = rboxes[..., 4].cos(), rboxes[..., 4].sin()
    a = var_w * cos.square() + var_h * sin.square()
    b = var_w * sin.square() + var_h * cos.square()
    c = (var_w - var_h) * cos * sin
    return a, b, c


def bhattacharyya(pred: Tensor, target: Tensor) -> Tensor:
    """Bhattacharyya distance of broadcast rotated-box pairs ``(..., 5), (..., 5) -> (...)``, in ``[0, 100]``."""
    a1, b1, c1 = _covariance(pred)
    a2, b2, c2 = _covariance(target)
    a, b, c = (a1 + a2) / 2, (b1 + b2) / 2, (c1 + c2) / 2
    det = (a * b - c.square()).clamp(min=_EPS)
    dx = pred[..., 0] - target[..., 0]
    dy = pred[..., 1] - target[..., 1]
    mahalanobis = (b * dx.square() + a * dy.square() - 2 * c * dx * dy) / det
    det1 = (a1 * b1 - c1.square()).clamp(min=0)
    det2 = (a2 * b2 - c2.square()).clamp(min=0)
    shape = 0.5 * (det / ((det1 * det2).sqrt() + _EPS)).clamp(min=_EPS).log()
    return (mahalanobis / 8 + shape).clamp(min=0.0, max=100.0)


def hellinger(pred: Tensor, target: Tensor) -> Tensor:
    """``1 - ProbIoU`` of broadcast pairs ``(..., 5), (..., 5) -> (...)`` in ``[0, 1]``: the box loss.

    The ``1e-7`` under the root keeps the gradient finite at a perfect match
    (identical boxes give ``3e-4``, not 0).
    """
    return (1.0 - (-bhattacharyya(pred, target)).exp() + _EPS).sqrt()


def probiou(pred: Tensor, target: Tensor) -> Tensor:
    """ProbIoU of broadcast pairs ``(..., 5), (..., 5) -> (...)`` in ``[0, 1]`` (1 for identical boxes)."""
    return 1.0 - hellinger(pred, target)
