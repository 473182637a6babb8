"""Rotated boxes, corner fits and rasterisation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lucidyolo.structures.geometry import (
    canonicalize_rboxes,
    corners_to_rbox,
    hflip_rboxes,
    min_area_rboxes_of_polygons,
    polygon_areas,
    polygons_to_masks,
    polygons_to_xyxy,
    rbox_to_corners,
    rboxes_to_xyxy,
)
from lucidyolo.structures.targets import Polygons

_rbox = st.tuples(
    st.floats(0, 500), st.floats(0, 500), st.floats(2, 200), st.floats(2, 200), st.floats(-10, 10)
)


def _same_box(a: np.ndarray, b: np.ndarray) -> bool:
    """Same set of corners (order-free), within 1e-2 px."""
    ca, cb = rbox_to_corners(a[None])[0], rbox_to_corners(b[None])[0]
    d = np.linalg.norm(ca[:, None] - cb[None], axis=-1)
    return bool(d.min(1).max() < 1e-2)


@settings(max_examples=200, deadline=None)
@given(_rbox)
def test_canonical_form_is_long_edge_in_range_and_the_same_box(rb):
    rb = np.array(rb, np.float64)
    c = canonicalize_rboxes(rb[None])[0]
    assert c[2] >= c[3]
    assert -np.pi / 4 <= c[4] < 3 * np.pi / 4
    assert _same_box(rb, c.astype(np.float64))


@settings(max_examples=200, deadline=None)
@given(_rbox)
def test_corner_fit_recovers_the_rotated_box(rb):
    rb = canonicalize_rboxes(np.array([rb]))
    fit = corners_to_rbox(rbox_to_corners(rb))
    assert np.allclose(fit[0, :4], rb[0, :4], atol=1e-2)
    assert _same_box(rb[0], fit[0])


def test_corner_fit_of_a_skewed_quad_encloses_it_with_minimal_area():
    quad = np.array([[[0, 0], [10, 1], [11, 6], [0, 5]]], np.float64)
    rb = corners_to_rbox(quad)[0]
    # Every quad point lies inside the fitted rectangle (small tolerance).
    c, s = np.cos(rb[4]), np.sin(rb[4])
    local = (quad[0] - rb[:2]) @ np.array([[c, -s], [s, c]])
    assert np.all(np.abs(local[:, 0]) <= rb[2] / 2 + 1e-3)
    assert np.all(np.abs(local[:, 1]) <= rb[3] / 2 + 1e-3)
    assert rb[2] * rb[3] <= 11 * 6  # no worse than the axis-aligned box


def test_hflip_mirrors_and_stays_canonical():
    rb = canonicalize_rboxes(np.array([[30.0, 40.0, 50.0, 10.0, 0.3], [30.0, 40.0, 50.0, 10.0, -0.7]]))
    f = hflip_rboxes(rb, width=100)
    assert np.all((f[:, 4] >= -np.pi / 4) & (f[:, 4] < 3 * np.pi / 4))
    expect = rbox_to_corners(rb).copy()
    expect[..., 0] = 100 - expect[..., 0]
    for i in range(2):
        got = rbox_to_corners(f[i : i + 1])[0]
        d = np.linalg.norm(got[:, None] - expect[i][None], axis=-1)
        assert d.min(1).max() < 1e-3


def test_rboxes_to_xyxy_of_axis_aligned_box():
    xyxy = rboxes_to_xyxy(np.array([[50.0, 20.0, 40.0, 10.0, 0.0]]))
    assert np.allclose(xyxy, [[30, 15, 70, 25]])


def test_mask_area_matches_polygon_area_and_rings_union_per_owner():
    sq = np.array([[10, 10], [30, 10], [30, 30], [10, 30]], np.float64)
    tri = np.array([[40, 40], [60, 40], [40, 60]], np.float64)
    polys = Polygons.from_rings([sq, tri, sq + 5], [1, 1, 0])
    masks = polygons_to_masks(polys, 3, 64, 64)
    assert masks.shape == (3, 64, 64) and masks.dtype == np.uint8
    assert abs(int(masks[1].sum()) - (400 + 200)) <= 0.1 * 600
    assert abs(int(masks[0].sum()) - 400) <= 0.1 * 400
    assert masks[2].sum() == 0  # instance without rings
    assert np.allclose(polygon_areas(polys), [400, 200, 400])


def test_polygons_to_xyxy_spans_all_rings_of_an_instance():
    polys = Polygons.from_rings([np.array([[0, 0], [5, 0], [5, 5]]), np.array([[10, 10], [12, 10], [12, 20]])], [0, 0])
    assert polygons_to_xyxy(polys, 2).tolist() == [[0, 0, 12, 20], [0, 0, 0, 0]]


def test_min_area_rboxes_handles_four_and_many_point_instances():
    rb = canonicalize_rboxes(np.array([[50.0, 50.0, 40.0, 10.0, 0.5]]))
    corners = rbox_to_corners(rb)[0]
    octagon_ring = np.concatenate([corners, (corners + np.roll(corners, -1, 0)) / 2])  # 8 points, same rectangle
    polys = Polygons.from_rings([corners, octagon_ring], [0, 1])
    out = min_area_rboxes_of_polygons(polys, 2)
    assert np.allclose(out[0, :4], rb[0, :4], atol=1e-2)
    assert np.allclose(out[1, :4], rb[0, :4], atol=1e-2)


def test_hflip_of_a_box_and_its_side_swapped_twin_is_the_same_canonical_box():
    # (w, h, theta) and (h, w, theta + pi/2) are one box: mirrored, both must land on one canonical box.
    for theta in (-np.pi / 4, 0.0, np.pi / 4, np.pi / 2, 3 * np.pi / 4 - 1e-6, 1.234):
        a = np.array([[30.0, 40.0, 50.0, 10.0, theta]])
        b = np.array([[30.0, 40.0, 10.0, 50.0, theta + np.pi / 2]])
        fa, fb = hflip_rboxes(a, width=100), hflip_rboxes(b, width=100)
        assert np.allclose(fa[:, :4], fb[:, :4], atol=1e-4)
        d = abs(float(fa[0, 4] - fb[0, 4]))
        assert min(d, np.pi - d) < 1e-4
        assert -np.pi / 4 <= fa[0, 4] < 3 * np.pi / 4


def test_hflip_at_the_edge_angles_hand_values():
    # theta = -pi/4 mirrors to +pi/4; theta = 0 stays 0; theta = pi/2 mirrors to -pi/2 == pi/2 (mod pi).
    rb = np.array([[10.0, 5.0, 8.0, 2.0, -np.pi / 4], [10.0, 5.0, 8.0, 2.0, 0.0], [10.0, 5.0, 8.0, 2.0, np.pi / 2]])
    f = hflip_rboxes(rb, width=40)
    assert np.allclose(f[:, 0], 30.0)
    assert np.allclose(f[:, 4], [np.pi / 4, 0.0, np.pi / 2], atol=1e-6)


def test_a_rotated_box_follows_a_mirror_as_its_flip_does():
    """Hand-derived: the box at (10, 20), 8 x 4, theta 0.3 mirrored in x' = 100 - x sits at (90, 20) with
    its axis at -0.3; the affine rule under the mirror matrix and the flip rule agree on random boxes."""
    from lucidyolo.structures.fields import get_field
    from lucidyolo.structures.geometry import canonicalize_rboxes

    rule = get_field("rboxes")
    mirror = np.array([[-1.0, 0.0, 100.0], [0.0, 1.0, 0.0]])
    one = np.array([[10.0, 20.0, 8.0, 4.0, 0.3]], np.float32)
    assert np.allclose(rule.affine({"rboxes": one}, mirror)["rboxes"], [[90.0, 20.0, 8.0, 4.0, -0.3]], atol=1e-6)
    rng = np.random.default_rng(0)
    boxes = canonicalize_rboxes(np.c_[rng.uniform(0, 100, (64, 2)), rng.uniform(1, 30, (64, 2)),
                                      rng.uniform(-4, 4, 64)].astype(np.float32))
    assert np.allclose(rule.affine({"rboxes": boxes}, mirror)["rboxes"], rule.flip({"rboxes": boxes}, 100.0, {})["rboxes"],
                       atol=1e-5)
    # a mirror with a turn and a scale: the axis mirrors, then turns
    turned = np.array([[0.0, -2.0, 50.0], [-2.0, 0.0, 60.0]])  # x' = -2y + 50, y' = -2x + 60: det < 0
    got = rule.affine({"rboxes": one}, turned)["rboxes"]
    assert np.allclose(got[0], [10.0, 40.0, 16.0, 8.0, np.pi / 2 - 0.3], atol=1e-5)  # axis u -> (-2 sin, -2 cos)
