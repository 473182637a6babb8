"""Rotated candidacy: inside the turned rectangle, and STAL widening of short rotated sides."""

from __future__ import annotations

import math

import torch

from lucidyolo.assign.rotated_candidates import anchors_in_rboxes


def test_a_diagonal_box_holds_its_diagonal_not_its_envelope_corners():
    # A 40 x 4 box turned by 45 degrees around (50, 50): (60, 60) lies on its long axis,
    # (60, 40) lies in the upright envelope but 14 px off the axis.
    rb = torch.tensor([[[50.0, 50.0, 40.0, 4.0, math.pi / 4]]])
    anchors = torch.tensor([[60.0, 60.0], [60.0, 40.0], [50.0, 50.0]])
    got = anchors_in_rboxes(anchors, rb, min_side=None)[0, 0]
    assert got.tolist() == [True, False, True]


def test_stal_widens_only_the_short_rotated_side():
    # 40 x 4 box along x: an anchor 6 px above the centre is outside (|v| = 6 > 2) until the
    # short side becomes 16 (|v| <= 8); one 30 px along x stays outside (|u| = 30 > 20).
    rb = torch.tensor([[[50.0, 50.0, 40.0, 4.0, 0.0]]])
    anchors = torch.tensor([[50.0, 56.0], [80.0, 50.0]])
    assert anchors_in_rboxes(anchors, rb, min_side=None)[0, 0].tolist() == [False, False]
    assert anchors_in_rboxes(anchors, rb, min_side=8.0)[0, 0].tolist() == [True, False]


def test_edges_are_inclusive():
    rb = torch.tensor([[[0.0, 0.0, 10.0, 10.0, 0.0]]])
    assert anchors_in_rboxes(torch.tensor([[5.0, 5.0]]), rb, min_side=None).all()
