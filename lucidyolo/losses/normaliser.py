"""Loss normalisers counted over the global batch, so several processes compute one process's objective.

Every loss term divides a sum over the batch's targets by a count of them (the
soft target-weight sum ``W``, the number of positives, of visible keypoints).
Under DDP each process sees ``1 / world`` of the batch, and Lightning averages
the processes' gradients. If each process divided its own sum by its own
count, the average would weight a positive of a crowded shard less than one of
a sparse shard, and the floor ``max(W, 1)`` would bite per shard: not the
single-process objective. With the count summed over every process first,

    loss_r = S_r / (max(sum_r' W_r', floor) / world)

and the mean of ``loss_r`` over the processes (what DDP's gradient average
differentiates) is ``sum_r S_r / max(sum_r W_r, floor)``: the single-process
loss of the whole global batch, up to float summation order. In one process
(or without an initialised process group) this is ``max(W, floor)``.

The all-reduce is a collective: every process must call it the same number of
times, so a term computes its normaliser before any early return.
"""

from __future__ import annotations

from torch import Tensor


def world_size() -> int:
    """Processes in the default group, 1 when ``torch.distributed`` is not initialised."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return int(dist.get_world_size())


def global_normaliser(count: Tensor, floor: float = 1.0) -> Tensor:
    """``max(sum over processes of count, floor) / world``: the divisor of a process's share of a loss.

    Args:
        count: 0-d local count or weight sum (any float or integer dtype; no gradient is taken through it).

    Returns:
        0-d float32 tensor on ``count``'s device, detached.
    """
    total = count.detach().float()
    world = world_size()
    if world > 1:
        import torch.distributed as dist

        total = total.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total.clamp(min=floor) / world
