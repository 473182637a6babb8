"""MuSGD: the exact update rule, Newton-Schulz, param groups and the toy speed-up over SGD."""

from __future__ import annotations

import math

import pytest
import torch

from lucidyolo.optim import MuSGD, newton_schulz5
from lucidyolo.optim.musgd import native_bf16_matmul, resolve_ns_dtype


def _ns5_by_hand(m: torch.Tensor) -> torch.Tensor:
    """The spec's NS5 written out for one 2-D matrix."""
    x = m.double() / (m.double().norm() + 1e-7)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(5):
        g = x @ x.T
        x = 3.4445 * x + (-4.7750 * g + 2.0315 * g @ g) @ x
    return (x.T if tall else x).float()


def test_newton_schulz_matches_the_spec_and_nearly_orthogonalises() -> None:
    m = torch.randn(12, 40, generator=torch.Generator().manual_seed(0))
    for mat in (m, m.T):  # wide and tall
        out = newton_schulz5(mat)
        assert torch.allclose(out, _ns5_by_hand(mat), atol=1e-4)
        sv = torch.linalg.svdvals(out)
        assert (
            sv.min() > 0.6 and sv.max() < 1.25
        )  # the quintic maps singular values into ~[0.7, 1.2]


def test_newton_schulz_runs_in_fp32_for_half_inputs_and_batches_independently() -> None:
    g = torch.Generator().manual_seed(1)
    stack = torch.randn(3, 8, 5, generator=g)
    out = newton_schulz5(stack.half())
    assert out.dtype == torch.float32
    for i in range(3):
        assert torch.allclose(newton_schulz5(stack[i]), newton_schulz5(stack)[i], atol=1e-5)


def test_bfloat16_iteration_still_orthogonalises_and_returns_float32() -> None:
    # Muon's reference runs NS in bfloat16: the singular values must still land in the
    # quintic's band, and the result stay within bfloat16 rounding of the float64 iteration.
    m = torch.randn(4, 64, 144, generator=torch.Generator().manual_seed(3))
    for mat in (m, m.mT):
        out = newton_schulz5(mat, dtype=torch.bfloat16)
        assert out.dtype == torch.float32 and out.shape == mat.shape
        sv = torch.linalg.svdvals(out)
        assert sv.min() > 0.6 and sv.max() < 1.25
        ref = torch.stack([_ns5_by_hand(x) for x in mat])
        rel = (out - ref).norm(dim=(-2, -1)) / ref.norm(dim=(-2, -1))
        assert rel.max() < 0.05  # bfloat16 keeps 8 bits: ~0.4% per rounding, five iterations
        assert rel.max() > 1e-4  # and it did run in bfloat16 (float32 agrees to ~1e-6)


def test_ns_dtype_choice_follows_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert resolve_ns_dtype("float32", cpu) is None
    assert resolve_ns_dtype("bfloat16", cpu) is torch.bfloat16
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert not native_bf16_matmul(cpu) and resolve_ns_dtype("auto", cpu) is None
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert native_bf16_matmul(cpu) and resolve_ns_dtype("auto", cpu) is torch.bfloat16
    assert not native_bf16_matmul(torch.device("meta"))
    with pytest.raises(ValueError, match="newton_schulz_dtype"):
        resolve_ns_dtype("fp8", cpu)


def test_bfloat16_option_is_used_by_the_step_and_old_state_dicts_load() -> None:
    g = torch.Generator().manual_seed(4)
    w32 = torch.nn.Parameter(torch.randn(16, 48, generator=g))
    w16 = torch.nn.Parameter(w32.detach().clone())
    grad = torch.randn(16, 48, generator=g)
    opt32, opt16 = MuSGD([w32], lr=0.1), MuSGD([w16], lr=0.1, ns_dtype=torch.bfloat16)
    w32.grad, w16.grad = grad.clone(), grad.clone()
    opt32.step()
    opt16.step()
    assert not torch.equal(w32, w16) and torch.allclose(w32, w16, atol=5e-3)
    state = opt32.state_dict()
    del state["param_groups"][0]["ns_dtype"]  # a checkpoint written before the option existed
    fresh = MuSGD([w32], lr=0.1, ns_dtype=torch.bfloat16)
    fresh.load_state_dict(state)
    assert fresh.param_groups[0]["ns_dtype"] is None


def test_two_steps_follow_the_spec_formula_for_matrices_and_vectors() -> None:
    g = torch.Generator().manual_seed(2)
    conv = torch.nn.Parameter(torch.randn(6, 3, 3, 3, generator=g))
    bias = torch.nn.Parameter(torch.randn(6, generator=g))
    lr, mu, wd = 0.05, 0.95, 0.01
    opt = MuSGD([conv, bias], lr=lr, momentum=mu, weight_decay=wd)
    w, b = conv.detach().clone(), bias.detach().clone()
    mw, mb = torch.zeros_like(w), torch.zeros_like(b)
    for _ in range(2):
        gw, gb = torch.randn(w.shape, generator=g), torch.randn(b.shape, generator=g)
        conv.grad, bias.grad = gw.clone(), gb.clone()
        opt.step()
        mw, mb = mu * mw + gw, mu * mb + gb
        dw, db = gw + mu * mw, gb + mu * mb
        ortho = _ns5_by_hand(dw.reshape(6, 27)).reshape(w.shape)
        w = w - lr * (0.5 * 0.2 * math.sqrt(27) * ortho + 0.5 * dw + wd * w)
        b = b - lr * db  # no weight decay, no orthogonalisation
        assert torch.allclose(conv, w, atol=1e-5)
        assert torch.allclose(bias, b, atol=1e-6)


def test_param_group_lr_and_weight_decay_are_honoured() -> None:
    a = torch.nn.Parameter(torch.ones(4, 4))
    b = torch.nn.Parameter(torch.ones(4, 4))
    opt = MuSGD([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.0, "weight_decay": 0.5}])
    a.grad = torch.zeros(4, 4)
    b.grad = torch.ones(4, 4)
    opt.step()
    # Zero gradient: only the default decay moves a: a * (1 - lr * wd).
    assert torch.allclose(a, torch.full((4, 4), 1 - 0.1 * 5e-4))
    assert torch.equal(b, torch.ones(4, 4))  # lr 0 freezes the group
    assert opt.state[b]["momentum_buffer"].eq(1).all()


def _steps_to_target(make_opt, target_fraction: float = 0.01, max_steps: int = 4000) -> int:
    """Steps until an ill-conditioned least-squares loss falls below ``target_fraction`` of its start."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 32, generator=g) * torch.logspace(0, -1.5, 32)  # Hessian condition ~1e3
    y = x @ torch.randn(16, 32, generator=g).T
    w = torch.zeros(16, 32, requires_grad=True)
    opt = make_opt([w])
    start = None
    for step in range(max_steps):
        loss = ((x @ w.T - y) ** 2).mean()
        start = loss.item() if start is None else start
        if loss.item() <= target_fraction * start:
            return step
        opt.zero_grad()
        loss.backward()
        opt.step()
    return max_steps


def test_musgd_reaches_the_toy_target_in_at_most_06x_the_sgd_steps() -> None:
    lr = 0.01
    musgd = _steps_to_target(lambda p: MuSGD(p, lr=lr, weight_decay=0.0))
    sgd = _steps_to_target(lambda p: torch.optim.SGD(p, lr=lr, momentum=0.95, nesterov=True))
    assert sgd < 4000, "SGD baseline must converge for the ratio to mean anything"
    assert musgd <= 0.6 * sgd, (musgd, sgd)


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        MuSGD([torch.nn.Parameter(torch.ones(2))], lr=-1.0)
    with pytest.raises(ValueError):
        MuSGD([torch.nn.Parameter(torch.ones(2))], momentum=1.0)
