"""Exact rotated IoU: corners, shapely agreement, hand-derived degenerate cases, shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import shapely
import torch

import lucidyolo.structures.rotated_iou as rotated_iou_module
from lucidyolo.structures.geometry import rbox_to_corners
from lucidyolo.structures.rotated_iou import rbox_corners, rotated_iou_matrix, rotated_iou_pairs

SQRT2 = math.sqrt(2.0)


def _corners64(rb: np.ndarray) -> np.ndarray:
    """The corner formula of geometry.rbox_to_corners without its float32 cast: an exact reference."""
    rb = np.asarray(rb, np.float64)
    c, s = np.cos(rb[:, 4]), np.sin(rb[:, 4])
    half = np.array([[-0.5, -0.5], [0.5, -0.5], [0.5, 0.5], [-0.5, 0.5]])
    lx, ly = half[None, :, 0] * rb[:, None, 2], half[None, :, 1] * rb[:, None, 3]
    x = rb[:, None, 0] + lx * c[:, None] - ly * s[:, None]
    y = rb[:, None, 1] + lx * s[:, None] + ly * c[:, None]
    return np.stack([x, y], -1)


def _shapely_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of pairs of float32 boxes, by shapely in float64 on their exact corners."""
    pa, pb = shapely.polygons(_corners64(a)), shapely.polygons(_corners64(b))
    inter = shapely.area(shapely.intersection(pa, pb))
    union = shapely.area(pa) + shapely.area(pb) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _ours(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return rotated_iou_pairs(torch.from_numpy(a), torch.from_numpy(b)).numpy()


def _random_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Centres anywhere in a 1000 px image, sides 0.5-200 px (log-uniform), any angle; b near a."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0, 1000, (n, 2))
    wh_a = np.exp(rng.uniform(np.log(0.5), np.log(200), (n, 2)))
    wh_b = np.exp(rng.uniform(np.log(0.5), np.log(200), (n, 2)))
    offset = rng.normal(0, 0.4, (n, 2)) * np.maximum(wh_a, wh_b).max(1, keepdims=True)
    theta = rng.uniform(-np.pi, np.pi, (n, 2))
    a = np.concatenate([centre, wh_a, theta[:, :1]], 1).astype(np.float32)
    b = np.concatenate([centre + offset, wh_b, theta[:, 1:]], 1).astype(np.float32)
    return a, b


def test_corners_match_geometry_rbox_to_corners() -> None:
    rng = np.random.default_rng(0)
    rb = np.concatenate(
        [rng.uniform(0, 1000, (500, 2)), rng.uniform(0.5, 200, (500, 2)), rng.uniform(-7, 7, (500, 1))], 1
    )
    ref = rbox_to_corners(rb)  # (N, 4, 2) float32 rounded from float64
    ours64 = rbox_corners(torch.from_numpy(rb)).numpy()
    np.testing.assert_allclose(ours64, ref, rtol=0, atol=1e-4)  # float32 rounding of ~1000 px
    ours32 = rbox_corners(torch.from_numpy(rb.astype(np.float32)))
    assert ours32.dtype == torch.float32 and ours32.shape == (500, 4, 2)
    np.testing.assert_allclose(ours32.numpy(), ref, rtol=0, atol=5e-4)
    # Leading dimensions are free.
    assert rbox_corners(torch.zeros(2, 3, 5)).shape == (2, 3, 4, 2)


def test_matches_shapely_on_random_pairs() -> None:
    a, b = _random_pairs(3000, seed=1)
    ref = _shapely_iou(a, b)
    ours = _ours(a, b)
    assert (ref > 0).mean() > 0.3  # the pairs really overlap, in all kinds of ways
    assert np.isfinite(ours).all() and (ours >= 0).all() and (ours <= 1).all()
    assert np.abs(ours - ref).max() < 1e-4


def test_matches_shapely_with_collinear_edges_and_near_parallel_angles() -> None:
    rng = np.random.default_rng(2)
    n = 2000
    # Integer grid, angles multiples of pi/2: shared edges, collinear overlaps, touching boxes.
    c = rng.integers(0, 6, (n, 4)).astype(np.float32)
    wh = rng.integers(1, 5, (n, 4)).astype(np.float32)
    k = rng.integers(-2, 3, (n, 2)) * (np.pi / 2)
    a = np.stack([c[:, 0], c[:, 1], wh[:, 0], wh[:, 1], k[:, 0]], 1).astype(np.float32)
    b = np.stack([c[:, 2], c[:, 3], wh[:, 2], wh[:, 3], k[:, 1]], 1).astype(np.float32)
    assert np.abs(_ours(a, b) - _shapely_iou(a, b)).max() < 1e-5
    # The same box turned by a tiny angle (and sometimes shifted): nearly parallel edges.
    base = np.concatenate(
        [rng.uniform(0, 1000, (n, 2)), np.exp(rng.uniform(np.log(0.5), np.log(200), (n, 2))), rng.uniform(-4, 4, (n, 1))],
        1,
    ).astype(np.float32)
    for tiny in (1e-7, 1e-6, 1e-5, 1e-3):
        other = base.copy()
        other[:, 4] += rng.choice([-1.0, 1.0], n) * tiny
        other[:, 0] += rng.integers(0, 2, n) * rng.uniform(-0.5, 0.5, n) * base[:, 2]
        assert np.abs(_ours(base, other) - _shapely_iou(base, other)).max() < 1e-4


_R = math.pi / 4
_OCTAGON = 2 * (SQRT2 - 1)  # unit square and the same square turned 45 deg
HAND_CASES = {
    # name: (box a, box b, IoU)
    "unit squares offset by half": ([0, 0, 1, 1, 0], [0.5, 0, 1, 1, 0], 1 / 3),
    "square and itself at 45 deg": ([0, 0, 1, 1, 0], [0, 0, 1, 1, _R], _OCTAGON / (2 - _OCTAGON)),
    "identical, far from the origin": ([812.25, 640.5, 30, 7, 0.3], [812.25, 640.5, 30, 7, 0.3], 1.0),
    "w and h swapped, theta + pi/2": ([10, 10, 30, 7, 0.3], [10, 10, 7, 30, 0.3 + math.pi / 2], 1.0),
    "theta + pi": ([10, 10, 30, 7, 0.3], [10, 10, 30, 7, 0.3 + math.pi], 1.0),
    "theta - 2 pi": ([10, 10, 30, 7, 0.3], [10, 10, 30, 7, 0.3 - 2 * math.pi], 1.0),
    "turned by pi/2 about the centre": ([0, 0, 4, 2, 0], [0, 0, 4, 2, math.pi / 2], 4 / 12),
    "one inside the other": ([0, 0, 10, 10, 0.2], [1, 1, 2, 3, 1.0], 6 / 100),
    "inside, sharing three edges": ([1, 0.5, 2, 1, 0], [0.5, 0.5, 1, 1, 0], 0.5),
    "inside, sharing a corner, rotated": ([0, 0, 2, 2, _R], [0, -1 / SQRT2, 1, 1, _R], 0.25),
    "collinear partial overlap": ([1, 0.5, 2, 1, 0], [2, 0.5, 2, 1, 0], 1 / 3),
    "plus sign": ([0, 0, 3, 1, 0], [0, 0, 1, 3, 0], 1 / 5),
    "touching along an edge": ([0.5, 0.5, 1, 1, 0], [1.5, 0.5, 1, 1, 0], 0.0),
    "touching along an edge, rotated": ([0, 0, 2, 1, 1.0], [2 * math.cos(1.0), 2 * math.sin(1.0), 2, 1, 1.0 + math.pi], 0.0),
    "touching at a corner": ([0.5, 0.5, 1, 1, 0], [1.5, 1.5, 1, 1, 0], 0.0),
    "corner touching an edge": ([0, 0, 2, 2, 0], [1 + SQRT2 / 2, 0, 1, 1, _R], 0.0),
    "disjoint": ([0, 0, 2, 2, 0.4], [50, 0, 2, 2, 0.4], 0.0),
    "zero width": ([0, 0, 0, 1, 0], [0, 0, 1, 1, 0], 0.0),
    "zero height, rotated": ([0, 0, 1, 0, 0.7], [0, 0, 1, 1, 0.7], 0.0),
    "both zero size": ([3, 3, 0, 0, 0], [3, 3, 0, 0, 0], 0.0),
    "negative width counts as empty": ([0, 0, -1, 1, 0], [0, 0, 1, 1, 0], 0.0),
    "huge identical": ([5e4, 5e4, 1e5, 1e5, 0.1], [5e4, 5e4, 1e5, 1e5, 0.1], 1.0),
    "tiny identical, far from the origin": ([900, 900, 1e-3, 1e-3, 0.7], [900, 900, 1e-3, 1e-3, 0.7], 1.0),
    # 2**-10 px squares offset by half a side (all values exact in float32)
    "tiny offset by half": ([1024, 512, 2**-10, 2**-10, 0], [1024 + 2**-11, 512, 2**-10, 2**-10, 0], 1 / 3),
    "tiny inside huge": ([0, 0, 1000, 1000, 0.3], [10, 10, 1, 1, 1.2], 1e-6),
}


@pytest.mark.parametrize("a, b, expected", HAND_CASES.values(), ids=HAND_CASES.keys())
def test_hand_derived_values_both_ways(a, b, expected) -> None:
    ta, tb = torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32)
    for x, y in ((ta, tb), (tb, ta)):
        v = rotated_iou_pairs(x, y)
        assert v.shape == () and v.dtype == torch.float32 and torch.isfinite(v)
        assert v.item() == pytest.approx(expected, abs=2e-6, rel=1e-5)


def test_octagon_area_by_hand() -> None:
    # The 45-degree square cuts a corner triangle of legs (1 - 1/sqrt2) from each of 4 corners:
    # octagon = 1 - 4 * (1 - 1/sqrt2)^2 / 2 = 2 (sqrt2 - 1).
    assert pytest.approx(_OCTAGON) == 1 - 2 * (1 - 1 / SQRT2) ** 2
    v = rotated_iou_pairs(torch.tensor([0.0, 0, 1, 1, 0]), torch.tensor([0.0, 0, 1, 1, _R]))
    assert v.item() == pytest.approx(0.828427 / (2 - 0.828427), abs=1e-5)


def test_broadcasting_matches_flat_pairs() -> None:
    a, b = _random_pairs(2 * 5 * 7, seed=3)
    ta = torch.from_numpy(a[:10]).view(2, 5, 1, 5)
    tb = torch.from_numpy(b[:14]).view(2, 1, 7, 5)
    table = rotated_iou_pairs(ta, tb)
    assert table.shape == (2, 5, 7)
    ea, eb = ta.expand(2, 5, 7, 5).reshape(-1, 5), tb.expand(2, 5, 7, 5).reshape(-1, 5)
    torch.testing.assert_close(table.reshape(-1), rotated_iou_pairs(ea, eb))
    ref = _shapely_iou(ea.numpy(), eb.numpy()).reshape(2, 5, 7)
    assert np.abs(table.numpy() - ref).max() < 1e-4
    # A single box against a set, and the matrix wrapper.
    assert rotated_iou_pairs(ta[0, 0, 0], tb[0, 0]).shape == (7,)
    m = rotated_iou_matrix(torch.from_numpy(a[:9]), torch.from_numpy(b[:4]))
    torch.testing.assert_close(m, rotated_iou_pairs(torch.from_numpy(a[:9, None]), torch.from_numpy(b[None, :4])))
    assert rotated_iou_matrix(torch.zeros(0, 5), torch.ones(3, 5)).shape == (0, 3)
    assert rotated_iou_matrix(torch.ones(3, 5), torch.zeros(0, 5)).shape == (3, 0)


def test_chunked_evaluation_equals_one_step(monkeypatch) -> None:
    rng = np.random.default_rng(4)
    n = 60
    boxes = np.concatenate(
        [rng.uniform(0, 100, (n, 2)), rng.uniform(5, 40, (n, 2)), rng.uniform(-3, 3, (n, 1))], 1
    ).astype(np.float32)
    t = torch.from_numpy(boxes)
    whole = rotated_iou_matrix(t, t)
    monkeypatch.setattr(rotated_iou_module, "_GATHER_CHUNK", {"cpu": 97, "other": 97})
    monkeypatch.setattr(rotated_iou_module, "_EXACT_CHUNK", {"cpu": 13, "other": 13})
    assert torch.equal(rotated_iou_matrix(t, t), whole)
    torch.testing.assert_close(whole.diagonal(), torch.ones(n))


def test_symmetric() -> None:
    a, b = _random_pairs(1000, seed=5)
    ab, ba = _ours(a, b), _ours(b, a)
    assert np.abs(ab - ba).max() < 1e-6


def test_zero_size_boxes_give_zero_without_nan() -> None:
    boxes = torch.tensor(
        [[0, 0, 0, 0, 0], [0, 0, 0, 5, 0.3], [0, 0, 5, 0, 1.0], [0, 0, 5, 5, 0], [1, 1, 2, 2, 0.5]],
        dtype=torch.float32,
    )
    m = rotated_iou_matrix(boxes, boxes)
    assert torch.isfinite(m).all()
    assert (m[:3] == 0).all() and (m[:, :3] == 0).all()
    assert m[3, 3] == pytest.approx(1.0) and m[3, 4] == pytest.approx(4 / 25, abs=1e-6)


def test_runs_under_autograd_with_finite_gradients() -> None:
    a, b = _random_pairs(300, seed=6)
    ta = torch.from_numpy(a).requires_grad_()
    tb = torch.from_numpy(b)
    tb = torch.cat([tb, torch.tensor([[0.0, 0, 0, 0, 0]])]).requires_grad_()  # a zero-size box too
    ta2 = torch.cat([ta, ta[:1]])
    iou = rotated_iou_pairs(ta2, tb)
    iou.sum().backward()
    assert torch.isfinite(ta.grad).all() and torch.isfinite(tb.grad).all()
    assert ta.grad.abs().sum() > 0


def test_compute_dtype_is_float32_for_low_precision_inputs() -> None:
    a = torch.tensor([[0.0, 0, 2, 2, 0]])
    b = torch.tensor([[1.0, 0, 2, 2, 0]])
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        v = rotated_iou_pairs(a.to(dt), b.to(dt))
        assert v.dtype == torch.float32 and v.item() == pytest.approx(1 / 3, abs=1e-6)
