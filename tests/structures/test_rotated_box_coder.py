"""Rotated decode: the ltrb offset turns with the box, the result is canonical and matches numpy geometry."""

from __future__ import annotations

import math

import numpy as np
import torch

from lucidyolo.structures.geometry import canonicalize_rboxes as np_canonicalize
from lucidyolo.structures.rotated_box_coder import (
    canonicalize_rboxes,
    ltrb_angle_to_rbox,
    raw_to_angle,
    rboxes_to_xyxy,
)


def test_the_raw_angle_is_the_angle_and_decode_makes_it_canonical():
    # the published layout's angle: the raw output in radians, unbounded; decode canonicalises the box
    raw = torch.linspace(-30, 30, 101).unsqueeze(-1)
    assert torch.equal(raw_to_angle(raw), raw)
    a = raw.shape[0]
    ltrb = torch.tensor([1.0, 1.0, 3.0, 2.0]).expand(1, a, 4)
    rb = ltrb_angle_to_rbox(ltrb, raw[None], torch.zeros(a, 2), torch.ones(a))[0]
    theta = rb[:, 4]
    assert float(theta.min()) >= -math.pi / 4 - 1e-6 and float(theta.max()) < 3 * math.pi / 4 + 1e-6  # float32
    d = torch.remainder(theta - raw[:, 0], math.pi)  # the same orientation as the raw angle (w > h: no swap)
    assert bool((torch.minimum(d, math.pi - d) < 1e-4).all())


def test_hand_decoded_box():
    # Anchor (100, 50), stride 8, l t r b = 1 1 3 2 -> w = 32, h = 24, centre offset in the
    # box frame (8, 4) px. theta = pi/2 (the raw angle): the offset turns to (-4, 8).
    # w > h: already canonical, theta pi/2 is inside [-pi/4, 3pi/4).
    raw = torch.tensor([[[1.0, 1.0, 3.0, 2.0]]])
    angle = torch.tensor([[[math.pi / 2]]])
    rb = ltrb_angle_to_rbox(raw, angle, torch.tensor([[100.0, 50.0]]), torch.tensor([8.0]))[0, 0]
    assert torch.allclose(rb, torch.tensor([96.0, 58.0, 32.0, 24.0, math.pi / 2]), atol=1e-4)


def test_short_w_is_swapped_to_long_edge_form():
    # l t r b = 1 2 1 2 at stride 1: w = 2, h = 4, theta = 0 -> (4, 2, pi/2).
    raw = torch.tensor([[[1.0, 2.0, 1.0, 2.0]]])
    angle = torch.tensor([[[0.0]]])
    rb = ltrb_angle_to_rbox(raw, angle, torch.zeros(1, 2), torch.ones(1))[0, 0]
    assert torch.allclose(rb, torch.tensor([0.0, 0.0, 4.0, 2.0, math.pi / 2]), atol=1e-5)


def test_torch_canonical_form_equals_numpy_geometry():
    g = np.random.default_rng(0)
    rb = np.concatenate([g.uniform(0, 500, (500, 2)), g.uniform(1, 200, (500, 2)), g.uniform(-10, 10, (500, 1))], 1)
    ours = canonicalize_rboxes(torch.tensor(rb, dtype=torch.float64)).numpy()
    ref = np_canonicalize(rb)
    assert np.allclose(ours[:, :4], ref[:, :4], atol=1e-4)
    d = np.abs(ours[:, 4] - ref[:, 4])
    assert np.all(np.minimum(d, np.pi - d) < 1e-4)  # equal up to the range's open end


def test_envelope_of_a_quarter_turned_box():
    xyxy = rboxes_to_xyxy(torch.tensor([[50.0, 20.0, 40.0, 10.0, math.pi / 2]]))
    assert torch.allclose(xyxy, torch.tensor([[45.0, 0.0, 55.0, 40.0]]), atol=1e-4)
