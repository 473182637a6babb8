"""MuSGD: an even mix of Muon (orthogonalised momentum) and Nesterov SGD, as in YOLO26.

One momentum buffer per parameter: ``m <- mu m + g`` and the Nesterov direction
``g' = g + mu m``. Then

- parameters with ``ndim >= 2`` (conv and linear weights), viewed as
  ``(out, -1)`` of shape ``(A, B)``:
  ``update = 0.5 * 0.2 * sqrt(max(A, B)) * NS5(g') + 0.5 * g' + wd * W``;
- parameters with ``ndim <= 1`` (biases, norm scales): ``update = g'``, no
  weight decay;

and ``W <- W - lr * update``. ``NS5`` is the quintic Newton-Schulz iteration
that maps a matrix close to the orthogonal factor of its polar decomposition
(Jordan et al., "Muon", 2024); the ``0.2 sqrt(max(A, B))`` factor matches the
update RMS of Adam-like optimizers (Liu et al., "Muon is Scalable", 2025), so
the same lr suits both halves.

The spec runs NS5 in at least float32, the default here. On request
(``ns_dtype``) the iteration runs in bfloat16, as Muon's reference
implementation does: it only needs the singular values pushed into a band
around 1, and a bfloat16 matmul is faster where the hardware has native units
(CUDA, CPUs with AMX; the n model's 33 shape groups took 30 instead of 43 ms on
one AMX CPU). :func:`native_bf16_matmul` says where.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

NS5_COEFFS = (3.4445, -4.7750, 2.0315)


def newton_schulz5(matrix: Tensor, steps: int = 5, eps: float = 1e-7, dtype: torch.dtype | None = None) -> Tensor:
    """Approximate orthogonalisation of a (batch of) matrices by quintic Newton-Schulz.

    ``X = M / (||M||_F + eps)``, transposed when tall, then ``steps`` times
    ``X <- a X + (b G + c G^2) X`` with ``G = X X^T``. The norm is always taken
    in at least float32.

    Args:
        matrix: ``(..., R, K)``; leading dims are independent matrices.
        steps: iterations.
        eps: added to the Frobenius norm.
        dtype: dtype of the iteration (``torch.bfloat16`` where it is native);
            ``None``: at least float32.

    Returns:
        ``(..., R, K)`` in at least float32.
    """
    a, b, c = NS5_COEFFS
    wide = torch.promote_types(matrix.dtype, torch.float32)
    x = matrix.to(wide)
    x = x / (torch.linalg.matrix_norm(x, keepdim=True) + eps)
    if dtype is not None:
        x = x.to(dtype)
    tall = x.shape[-2] > x.shape[-1]
    if tall:  # iterate on the small Gram matrix
        x = x.mT
    flat = x.reshape(-1, *x.shape[-2:])  # baddbmm wants exactly one batch dim
    for _ in range(steps):
        gram = flat @ flat.mT
        # b G + c G^2 and a X + (...) X as two fused multiply-adds: no elementwise passes
        # over the temporaries (NS on the n model's 33 shape groups: 134 -> 94 ms on 2 CPU threads)
        poly = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        flat = torch.baddbmm(flat, poly, flat, beta=a)
    x = flat.reshape(x.shape)
    x = x.to(torch.promote_types(x.dtype, wide))
    return x.mT if tall else x


def native_bf16_matmul(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices in hardware: CUDA from compute capability 8.0, or a CPU with AMX tiles.

    Elsewhere (older GPUs, AVX-512 or AVX2 CPUs without AMX) a bfloat16 matmul is
    emulated and slower than float32. The capability is read directly: recent
    ``torch.cuda.is_bf16_supported()`` also answers True for emulation.
    """
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.get_device_capability(device)[0] >= 8)
    if device.type != "cpu":
        return False
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        return bool(probe()) if probe is not None else False
    except RuntimeError:
        return False


def resolve_ns_dtype(choice: str, device: torch.device) -> torch.dtype | None:
    """The Newton-Schulz dtype for ``choice`` (``auto``, ``float32`` or ``bfloat16``) on ``device``.

    ``auto`` is bfloat16 where :func:`native_bf16_matmul` holds, else float32
    (returned as ``None``: at least float32, the parameters' own precision when wider).
    """
    if choice == "bfloat16" or (choice == "auto" and native_bf16_matmul(device)):
        return torch.bfloat16
    if choice in ("auto", "float32"):
        return None
    raise ValueError(f"newton_schulz_dtype must be 'auto', 'float32' or 'bfloat16', got {choice!r}")


class MuSGD(Optimizer):
    """Muon + SGD hybrid optimizer (see module docstring for the update).

    Args:
        params: parameters or param groups; every group option below may be set per group.
        lr: learning rate.
        momentum: ``mu``.
        weight_decay: decay on ``ndim >= 2`` parameters only.
        nesterov: use ``g + mu m`` (True) or ``m`` (False) as the direction.
        muon_weight: weight of the orthogonalised half for matrices.
        sgd_weight: weight of the plain direction for matrices.
        rms_scale: the ``0.2`` in ``0.2 sqrt(max(A, B))``.
        ns_steps: Newton-Schulz iterations.
        ns_dtype: dtype of the Newton-Schulz iteration (``None``: at least float32).
    """

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 0.01,
        momentum: float = 0.95,
        weight_decay: float = 5e-4,
        nesterov: bool = True,
        muon_weight: float = 0.5,
        sgd_weight: float = 0.5,
        rms_scale: float = 0.2,
        ns_steps: int = 5,
        ns_dtype: torch.dtype | None = None,
    ) -> None:
        if lr < 0 or not 0 <= momentum < 1 or weight_decay < 0 or ns_steps < 1:
            raise ValueError(
                f"invalid MuSGD settings: lr={lr}, momentum={momentum}, "
                f"weight_decay={weight_decay}, ns_steps={ns_steps}"
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            weight_decay=weight_decay,
            nesterov=nesterov,
            muon_weight=muon_weight,
            sgd_weight=sgd_weight,
            rms_scale=rms_scale,
            ns_steps=ns_steps,
            ns_dtype=ns_dtype,
        )
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:  # checkpoints from before the option: the float32 iteration
            group.setdefault("ns_dtype", None)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """One update of every parameter with a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, mu = group["lr"], group["momentum"]
        params, grads, bufs = [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("MuSGD does not support sparse gradients")
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            params.append(p)
            grads.append(p.grad)
            bufs.append(state["momentum_buffer"])
        if not params:
            return
        # One fused kernel per elementwise step over all tensors (the arithmetic of the
        # per-tensor loop, in the same order): a conv net has hundreds of small tensors.
        torch._foreach_mul_(bufs, mu)
        torch._foreach_add_(bufs, grads)
        directions = torch._foreach_add(grads, bufs, alpha=mu) if group["nesterov"] else [b.clone() for b in bufs]
        vectors = [(p, d) for p, d in zip(params, directions, strict=True) if p.ndim < 2]
        if vectors:
            torch._foreach_add_([p for p, _ in vectors], [d for _, d in vectors], alpha=-lr)
        # Matrices of equal shape share one batched Newton-Schulz call: conv nets have
        # many identical small kernels, and one bmm beats dozens of tiny matmuls.
        matrices: dict[tuple[torch.Size, torch.dtype, torch.device], list[tuple[Tensor, Tensor]]]
        matrices = defaultdict(list)
        for p, d in zip(params, directions, strict=True):
            if p.ndim >= 2:
                matrices[(p.shape, p.dtype, p.device)].append((p, d))
        for (shape, dtype, _), items in matrices.items():
            rows = shape[0]
            cols = math.prod(shape[1:])
            stacked = torch.stack([d.reshape(rows, cols) for _, d in items])  # (N, A, B)
            ortho = newton_schulz5(stacked, steps=group["ns_steps"], dtype=group["ns_dtype"])
            scale = group["muon_weight"] * group["rms_scale"] * math.sqrt(max(rows, cols))
            ps = [p for p, _ in items]
            updates = [o.view(shape).to(dtype) for o in (ortho * scale).unbind(0)]
            torch._foreach_add_(updates, [d for _, d in items], alpha=group["sgd_weight"])
            if group["weight_decay"] != 0:
                torch._foreach_add_(updates, ps, alpha=group["weight_decay"])
            torch._foreach_add_(ps, updates, alpha=-lr)
