"""The two pieces that make 2 processes at half the batch compute 1 process's step: loss normalisers
summed over the processes and BatchNorm statistics of the global batch (2 gloo CPU ranks, forked)."""

from __future__ import annotations

import torch

from lucidyolo.assign.assignment import Assignment
from lucidyolo.losses.branch import BranchLoss
from lucidyolo.models.batchnorm import BatchNorm2d
from lucidyolo.models.sync_batchnorm import (
    SyncBatchNorm2d,
    convert_sync_batchnorm,
    revert_sync_batchnorm,
)
from tests.gloo_ranks import run_ranks

B, A, C = 8, 64, 3


def _branch_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Assignment]:
    """A batch of 8 whose first half holds most positives: per-shard normalisers differ a lot."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(B, A, C, generator=g)
    boxes = torch.rand(B, A, 2, generator=g) * 50
    pred = torch.cat([boxes, boxes + 5 + torch.rand(B, A, 2, generator=g) * 20], -1)
    fg = torch.rand(B, A, generator=g) < torch.tensor([0.5] * 4 + [0.03] * 4).view(B, 1)
    target = pred.detach() + torch.randn(B, A, 4, generator=g)
    weights = torch.rand(B, A, generator=g) * fg
    labels = torch.where(fg, torch.randint(0, C, (B, A), generator=g), torch.full((B, A), -1))
    gt_index = torch.where(fg, torch.zeros(B, A, dtype=torch.long), torch.full((B, A), -1))
    strides = torch.full((A,), 8.0)
    return logits, pred, strides, Assignment(labels, target * fg[..., None], weights, fg, gt_index)


def _shard(t: torch.Tensor, rank: int) -> torch.Tensor:
    return t[rank * B // 2 : (rank + 1) * B // 2]


def _branch_grads(rank: int | None) -> tuple[float, torch.Tensor, torch.Tensor]:
    """``(loss, dlogits, dpred)`` of the whole batch (``rank`` None) or of one rank's half."""
    logits, pred, strides, a = _branch_inputs()
    if rank is not None:
        logits, pred = _shard(logits, rank), _shard(pred, rank)
        a = Assignment(*(_shard(t, rank) for t in a))
    logits.requires_grad_(True)
    pred.requires_grad_(True)
    out = BranchLoss()(logits, pred, strides, a)
    out["total"].backward()
    return out["total"].item(), logits.grad, pred.grad


def _branch_body(rank: int) -> dict:
    loss, dlogits, dpred = _branch_grads(rank)
    return {"loss": loss, "dlogits": dlogits.tolist(), "dpred": dpred.tolist()}


def test_branch_loss_of_two_halves_is_the_whole_batch_loss(tmp_path):
    whole, dlogits, dpred = _branch_grads(None)
    ranks = run_ranks(_branch_body, 2, tmp_path)
    # DDP averages the ranks: the mean of the losses is the objective, and each rank's gradient / world its share
    mean_loss = sum(r["loss"] for r in ranks) / 2
    assert abs(mean_loss - whole) <= 1e-5 * abs(whole)
    got_logits = torch.cat([torch.tensor(r["dlogits"]) for r in ranks]) / 2
    got_pred = torch.cat([torch.tensor(r["dpred"]) for r in ranks]) / 2
    torch.testing.assert_close(got_logits, dlogits, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(got_pred, dpred, rtol=1e-5, atol=1e-7)
    # the check can fail: each half normalised by its own count (one process per half, no group) is another objective
    local = [_branch_grads(r)[0] for r in (0, 1)]
    assert abs(sum(local) / 2 - whole) > 0.05 * abs(whole)


def _bn_case() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 5, 6, 7, generator=g) * torch.tensor([1.0, 3.0, 0.2, 1.0, 5.0]).view(
        1, 5, 1, 1
    )
    x[:4] += 2.0  # the halves have different statistics
    return x.contiguous(memory_format=torch.channels_last), torch.randn(8, 5, 6, 7, generator=g)


def _bn_run(x: torch.Tensor, r: torch.Tensor, bn: torch.nn.Module) -> dict:
    torch.manual_seed(0)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    x = x.clone().requires_grad_(True)
    y = bn(x)
    (y * r).sum().backward()
    return {
        "y": y.tolist(),
        "dx": x.grad.tolist(),
        "dw": bn.weight.grad.tolist(),
        "db": bn.bias.grad.tolist(),
        "mean": bn.running_mean.tolist(),
        "var": bn.running_var.tolist(),
    }


def _bn_body(rank: int) -> dict:
    x, r = _bn_case()
    return _bn_run(_shard(x, rank), _shard(r, rank), SyncBatchNorm2d(5).train())


def test_sync_batchnorm_of_two_halves_is_batchnorm_of_the_whole_batch(tmp_path):
    x, r = _bn_case()
    whole = _bn_run(x, r, BatchNorm2d(5).train())
    ranks = run_ranks(_bn_body, 2, tmp_path)
    t = torch.tensor
    torch.testing.assert_close(
        torch.cat([t(k["y"]) for k in ranks]), t(whole["y"]), rtol=1e-5, atol=1e-5
    )
    # the summed loss: dx is each rank's own, the parameter gradients add up over the ranks
    torch.testing.assert_close(
        torch.cat([t(k["dx"]) for k in ranks]), t(whole["dx"]), rtol=1e-5, atol=1e-5
    )
    for key in ("dw", "db"):
        torch.testing.assert_close(
            t(ranks[0][key]) + t(ranks[1][key]), t(whole[key]), rtol=1e-5, atol=1e-4
        )
    for key in (
        "mean",
        "var",
    ):  # running statistics: global mean and unbiased global variance, on every rank
        for k in ranks:
            torch.testing.assert_close(t(k[key]), t(whole[key]), rtol=1e-5, atol=1e-6)
    # and it can fail: each half's own statistics differ from the whole batch's
    half = _bn_run(_shard(x, 0), _shard(r, 0), BatchNorm2d(5).train())
    assert (t(half["mean"]) - t(whole["mean"])).abs().max() > 0.05


def test_conversion_keeps_the_tensors_and_reverts():
    from torch import nn

    model = nn.Sequential(nn.Conv2d(3, 4, 3), BatchNorm2d(4), nn.Sequential(nn.BatchNorm2d(4)))
    before = {k: v for k, v in model.state_dict().items()}
    params = [id(p) for p in model.parameters()]
    convert_sync_batchnorm(model)
    assert isinstance(model[1], SyncBatchNorm2d) and isinstance(model[2][0], SyncBatchNorm2d)
    assert [
        id(p) for p in model.parameters()
    ] == params and model.state_dict().keys() == before.keys()
    # without a process group it is plain batch norm
    x = torch.randn(2, 4, 5, 5)
    torch.testing.assert_close(
        model[1](x), nn.functional.batch_norm(x, None, None, model[1].weight, model[1].bias, True)
    )
    revert_sync_batchnorm(model)
    assert not any(isinstance(m, SyncBatchNorm2d) for m in model.modules())
    assert [id(p) for p in model.parameters()] == params


def test_lightning_applies_the_plugin_only_under_several_processes():
    """``trainer.sync_batchnorm`` is a no-op in one process: Lightning hands layer syncs to DDP strategies only."""
    import pytorch_lightning as pl

    from lucidyolo.engine.process.layer_sync import GlobalBatchNorm

    common = {
        "accelerator": "cpu",
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
    }
    one = pl.Trainer(devices=1, plugins=[GlobalBatchNorm()], **common)
    assert getattr(one.strategy, "_layer_sync", None) is None
    two = pl.Trainer(devices=2, strategy="ddp", plugins=[GlobalBatchNorm()], **common)
    assert isinstance(two.strategy._layer_sync, GlobalBatchNorm)
