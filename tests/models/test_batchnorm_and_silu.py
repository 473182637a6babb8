"""The training-speed variants of the Conv unit's BatchNorm and SiLU compute what torch's modules compute."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lucidyolo.models.batchnorm import BatchNorm2d
from lucidyolo.models.conv import SiLU

CL = torch.channels_last


def _pair(c: int) -> tuple[BatchNorm2d, nn.BatchNorm2d]:
    ours, ref = BatchNorm2d(c, eps=1e-3, momentum=0.1), nn.BatchNorm2d(c, eps=1e-3, momentum=0.1)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
        ours.bias.uniform_(-1.0, 1.0)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


@pytest.mark.parametrize("shape", [(4, 21, 9, 7), (2, 42, 5, 5), (3, 5, 1, 1)])
def test_odd_width_channels_last_training_matches_torch_and_float64(shape):
    torch.manual_seed(0)
    ours, ref = _pair(shape[1])
    # an offset mean: the backward must not cancel sum(g * x) against mean * sum(g)
    x = (torch.randn(shape) * 3 + 5).contiguous(memory_format=CL)
    g = torch.randn(shape).contiguous(memory_format=CL)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), ref(xb)
    ya.backward(g)
    yb.backward(g)
    torch.testing.assert_close(ya, yb, rtol=0, atol=0)  # the forward is ATen's own
    assert xa.grad is not None and xa.grad.is_contiguous(memory_format=CL)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-4, atol=1e-4)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name), rtol=0, atol=0)
    # the hand-derived formula against autograd in float64
    xd = x.double().requires_grad_()
    refd = nn.BatchNorm2d(shape[1], eps=1e-3).double()
    refd.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in ours.state_dict().items()})
    refd(xd).backward(g.double())
    assert (xa.grad.double() - xd.grad).abs().max() < 1e-5


def test_other_layouts_widths_and_modes_are_plain_batchnorm():
    ours, ref = _pair(16)
    x = torch.randn(2, 16, 4, 4).contiguous(memory_format=CL)  # width 16: ATen's own backward
    assert ours(x).grad_fn.name() == ref(x).grad_fn.name()
    odd, _ = _pair(21)
    assert odd(torch.randn(2, 21, 4, 4)).grad_fn.name() != "_ChannelsLastBatchNormBackward"  # contiguous
    assert odd(torch.randn(2, 21, 4, 4).contiguous(memory_format=CL)).grad_fn.name() == "_ChannelsLastBatchNormBackward"
    odd.eval()
    assert odd(torch.randn(2, 21, 4, 4).contiguous(memory_format=CL)).grad_fn.name() != "_ChannelsLastBatchNormBackward"


def test_silu_writes_in_place_only_without_a_graph():
    x = torch.randn(2, 3, 4, 4)
    keep = x.clone()
    with torch.no_grad():
        y = SiLU()(x)
    assert y.data_ptr() == x.data_ptr()  # eval/predict: no new tensor
    torch.testing.assert_close(y, torch.nn.functional.silu(keep))
    x = keep.clone().requires_grad_()
    y = SiLU()(x)
    assert y.data_ptr() != x.data_ptr() and torch.equal(x.detach(), keep)  # training: the input survives
    y.sum().backward()
    sig = torch.sigmoid(keep)
    torch.testing.assert_close(x.grad, sig * (1 + keep * (1 - sig)))
