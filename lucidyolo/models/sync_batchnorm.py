"""BatchNorm whose training statistics are those of the global batch, on every device (gloo CPU included).

torch's ``nn.SyncBatchNorm`` refuses CPU tensors (its forward and backward are
CUDA kernels), so a multi-process CPU run could not check the math a GPU run
does. This one is written with plain tensor ops and two collectives per layer
and step (an all-gather in the forward, an all-reduce in the backward), so the same code runs on
gloo and NCCL. With ``n`` the global element count per channel (batch x H x W
summed over every process):

    forward:  mean and (biased) var of the global batch, combined from each process's count, mean and
              sum of squared deviations (one all-gather; no E[x^2] - E[x]^2 cancellation)
              running_var is updated with the unbiased ``var * n / (n - 1)``, as ``nn.BatchNorm2d`` does
    backward: with g = dL_r/dy and xhat = (x - mean) * invstd,
              dx = w * invstd * (g - sum_r sum(g) / n - xhat * sum_r sum(g xhat) / n)
              dw = sum(g xhat), db = sum(g)   (local; DDP averages them with every other gradient)

The backward's sums over every process make ``dx`` the gradient of the sum of
the processes' losses; DDP's average then gives the gradient of their mean,
which the global loss normalisers (:mod:`lucidyolo.losses.normaliser`) make the
single-process objective. Outside training, without an initialised process
group or with one process it is :class:`~lucidyolo.models.batchnorm.BatchNorm2d`
exactly (same parameters, buffers and state-dict keys).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from lucidyolo.models.batchnorm import BatchNorm2d


def _channel_sums(t: Tensor) -> Tensor:
    """``(N, C, H, W) -> (C,)`` sums over every dim but the channels."""
    return t.sum(dim=(0, 2, 3))


def _per_channel(v: Tensor) -> Tensor:
    """``(C,) -> (1, C, 1, 1)`` for broadcasting against ``(N, C, H, W)``."""
    return v.view(1, -1, 1, 1)


class _GlobalBatchNorm(torch.autograd.Function):
    """Training-mode batch norm over the global batch (see the module doc for the formulas)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: Tensor,
        weight: Tensor,
        bias: Tensor,
        running_mean: Tensor | None,
        running_var: Tensor | None,
        momentum: float,
        eps: float,
    ) -> Tensor:
        import torch.distributed as dist

        xf = x.float()
        c = x.shape[1]
        local_n = x.numel() // c
        # Each process's count, mean and squared deviations (two passes: no E[x^2] - E[x]^2 cancellation,
        # which cost 2e-4 of the running variance), gathered and combined exactly (Chan et al.):
        # M2 = sum_r M2_r + sum_r n_r (mean_r - mean)^2.
        local_mean = xf.mean(dim=(0, 2, 3))
        local_m2 = _channel_sums((xf - _per_channel(local_mean)).square())
        mine = torch.cat([xf.new_tensor([float(local_n)]), local_mean, local_m2])  # (1 + 2C,)
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, mine)
        table = torch.stack(parts)  # (world, 1 + 2C)
        counts, means, m2s = table[:, :1], table[:, 1 : 1 + c], table[:, 1 + c :]
        n = counts.sum()
        mean = (counts * means).sum(0) / n
        var = (m2s.sum(0) + (counts * (means - mean).square()).sum(0)) / n
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None and running_var is not None:
            with torch.no_grad():
                running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
                unbiased = var * n / (n - 1.0).clamp(min=1.0)
                running_var.mul_(1.0 - momentum).add_(
                    unbiased.to(running_var.dtype), alpha=momentum
                )
        xhat = (xf - _per_channel(mean)) * _per_channel(invstd)
        y = xhat * _per_channel(weight.float()) + _per_channel(bias.float())
        ctx.save_for_backward(x, weight, mean, invstd, n)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        import torch.distributed as dist

        x, weight, mean, invstd, n = ctx.saved_tensors
        g = grad.float()
        xhat = (x.float() - _per_channel(mean)) * _per_channel(invstd)
        sum_g = _channel_sums(g)  # (C,) local: the bias gradient
        sum_g_xhat = _channel_sums(g * xhat)  # (C,) local: the weight gradient
        both = torch.cat([sum_g, sum_g_xhat])
        dist.all_reduce(both, op=dist.ReduceOp.SUM)
        c = x.shape[1]
        mean_g, mean_g_xhat = both[:c] / n, both[c:] / n
        dx = _per_channel(weight.float() * invstd) * (
            g - _per_channel(mean_g) - xhat * _per_channel(mean_g_xhat)
        )
        return (
            dx.to(x.dtype),
            sum_g_xhat.to(weight.dtype),
            sum_g.to(weight.dtype),
            None,
            None,
            None,
            None,
        )


def _synchronising() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class SyncBatchNorm2d(BatchNorm2d):
    """:class:`~lucidyolo.models.batchnorm.BatchNorm2d` with global-batch statistics while training in several processes."""

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, C, H, W)``."""
        if not (
            self.training
            and _synchronising()
            and self.affine
            and self.track_running_stats
            and self.momentum is not None
        ):
            return super().forward(x)
        assert self.num_batches_tracked is not None and self.running_mean is not None
        self.num_batches_tracked.add_(1)
        return _GlobalBatchNorm.apply(
            x, self.weight, self.bias, self.running_mean, self.running_var, self.momentum, self.eps
        )


def _swap_batchnorm(module: nn.Module, source: type[nn.Module], target: type[nn.Module]) -> nn.Module:
    """``module`` with every ``source`` BatchNorm (not exactly a ``target`` already) replaced by a ``target`` holding
    the same parameters and buffers; in place below the root, which is returned (itself swapped if it matches)."""
    if isinstance(module, source) and type(module) is not target:
        out = target(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats)
        out.weight, out.bias = module.weight, module.bias
        out.running_mean, out.running_var = module.running_mean, module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.train(module.training)
        return out
    for name, child in module.named_children():
        new = _swap_batchnorm(child, source, target)
        if new is not child:
            setattr(module, name, new)
    return module


def convert_sync_batchnorm(module: nn.Module) -> nn.Module:
    """``module`` with every ``nn.BatchNorm2d`` replaced by :class:`SyncBatchNorm2d` sharing its parameters and buffers.

    In place below the root (children are swapped); returns the root, itself swapped if it is a BatchNorm.
    """
    return _swap_batchnorm(module, nn.BatchNorm2d, SyncBatchNorm2d)


def revert_sync_batchnorm(module: nn.Module) -> nn.Module:
    """The inverse of :func:`convert_sync_batchnorm` (the plain :class:`BatchNorm2d`, same tensors)."""
    return _swap_batchnorm(module, SyncBatchNorm2d, BatchNorm2d)
