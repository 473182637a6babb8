"""Starting from weights: class matching by name, cross-task transfer, variant refusal, freezing."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from lucidyolo.engine.weights.transfer import (
    SourceWeights,
    match_classes,
    per_class_tensors,
    transfer_weights,
)
from lucidyolo.errors import ConfigError
from lucidyolo.models import create_model
from lucidyolo.tasks.registry import get_task

PRIOR_BIAS = -math.log(99.0)  # logit of a 0.01 foreground prior: a fresh class row's bias


def _source(model: torch.nn.Module, names: list[str], task: str = "det", meta: dict | None = None) -> SourceWeights:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return SourceWeights(Path("src.ckpt"), task, "n", names, dict(meta or {}), state, used_ema=True)


def _build(task: str, num_classes: int, meta: dict | None = None) -> torch.nn.Module:
    spec = get_task(task)
    cfg = spec.config_model.model_validate({"task": spec.name})
    return spec.build_model(cfg=cfg, num_classes=num_classes, meta=meta or {})


def test_classes_match_by_name_whatever_the_order_and_by_index_on_request():
    src, dst = ["person", "car", "dog", "bus"], ["dog", "kite", "person", "car"]
    assert match_classes(src, dst, "name") == [2, -1, 0, 1]
    assert match_classes(src, dst, "position") == [0, 1, 2, 3]
    assert match_classes(["a", "b"], ["a", "b", "c"], "position") == [0, 1, -1]


def test_class_rows_move_to_their_new_positions_and_new_rows_stay_fresh():
    torch.manual_seed(0)
    old = create_model("n", num_classes=4)
    with torch.no_grad():
        for name in per_class_tensors(old):  # row i of every class tensor holds the value i + 1
            p = old.state_dict()[name]
            p.copy_(torch.arange(1, 5, dtype=p.dtype).view(-1, *([1] * (p.dim() - 1))).expand_as(p))
    new = create_model("n", num_classes=4)
    report = transfer_weights(new, _source(old, ["person", "car", "dog", "bus"]), ["dog", "kite", "person", "car"])
    state = new.state_dict()
    class_tensors = per_class_tensors(new)
    # both branches, three levels, weight and bias of the final conv
    assert len(class_tensors) == 12 and {n.split(".")[1] for n in class_tensors} == {"o2m", "o2o"}
    for name in class_tensors:
        rows = state[name]
        assert torch.all(rows[0] == 3) and torch.all(rows[2] == 1) and torch.all(rows[3] == 2), name
        if name.endswith("bias"):
            assert rows[1].item() == pytest.approx(PRIOR_BIAS, abs=1e-6)  # the new class: a fresh row
        else:
            assert not torch.all(rows[1] == rows[1].flatten()[0])  # random init, not a copied constant
    assert report.matched == ["dog", "person", "car"] and report.new == ["kite"] and report.dropped == ["bus"]
    assert report.classes_line() == "classes: 3 of 4 matched by name (dog, person, car); new: kite; dropped: bus"
    assert not report.skipped
    assert torch.equal(state["backbone.stem.0.conv.weight"], old.state_dict()["backbone.stem.0.conv.weight"])
    mapping = report.as_json()["classes"]["mapping"]
    assert mapping[1] == {"name": "kite", "index": 1, "from_index": None, "from_name": None}
    assert mapping[0]["from_name"] == "dog" and mapping[0]["from_index"] == 2


def test_a_det_checkpoint_starts_seg_and_seg_starts_det():
    det = _build("det", 4)
    seg = _build("seg", 4)
    report = transfer_weights(seg, _source(det, list("abcd")), list("abcd"))
    skipped = set(report.skipped)
    assert skipped and all(".stems.coeffs." in n or n.startswith("extras.") for n in skipped), sorted(skipped)[:4]
    assert all(r.startswith("missing") for r in report.skipped.values())
    assert any(".stems.logits." in n for n in report.class_rows)
    back = transfer_weights(_build("det", 4), _source(seg, list("abcd"), task="seg"), list("abcd"))
    assert not back.skipped and any(".stems.coeffs." in n for n in back.unused)
    assert any(n.startswith("extras.") for n in back.unused)


def test_keypoint_stems_of_another_k_start_fresh_with_the_reason():
    src = _build("keypoints", 1, {"num_keypoints": 17})
    dst = _build("keypoints", 1, {"num_keypoints": 7})
    weights = _source(src, ["person"], task="keypoints", meta={"num_keypoints": 17})
    report = transfer_weights(dst, weights, ["person"], {"num_keypoints": 7},
                              hook=get_task("keypoints").transfer_weights)
    reasons = {n: r for n, r in report.skipped.items() if ".stems.kpts." in n}
    # The keypoint tower's width is max(N3 // 4, 5 K) (the published layout): 85 for K = 17, 35 for K = 7 at n,
    # so the whole stem starts fresh: 2 branches x 3 levels x (2 tower Conv x (conv weight, BN weight, bias,
    # running mean, running var) + 2 outputs (rows, sigmas) x (weight, bias)); BN batch counters are shape-free.
    assert len(reasons) == 2 * 3 * (2 * 5 + 2 * 2)
    assert set(reasons.values()) == {"keypoints: the checkpoint predicts K=17 points, this dataset has K=7"}
    assert not set(report.skipped) - set(reasons)  # everything else loaded


def test_a_checkpoint_of_another_variant_is_refused():
    from lucidyolo.engine.weights.transfer import refuse_variant_mismatch

    weights = _source(create_model("n", 2), ["a", "b"])
    weights.variant = "s"
    with pytest.raises(ConfigError, match=r"holds a 's' model; this run builds 'n'"):
        refuse_variant_mismatch(weights, "n", "x.ckpt")


def test_freeze_keeps_parameters_and_batchnorm_statistics_bit_identical_through_a_step():
    from lucidyolo.engine.loop.ema import ModelEMA
    from lucidyolo.engine.loop.freeze import FreezeCallback, frozen_modules, trunk_modules
    from lucidyolo.optim.musgd import MuSGD

    torch.manual_seed(0)
    model = create_model("n", num_classes=2)
    assert len(trunk_modules(model)) == 17  # 11 backbone modules in forward order, then 6 neck modules
    assert [n for n, _ in frozen_modules(model, 3)] == ["backbone.stem.0", "backbone.stem.1", "backbone.stage2"]
    names = [n for n, _ in frozen_modules(model, "backbone")]
    callback = FreezeCallback(names)
    system = SimpleNamespace(model=model, training=True)
    callback.setup(None, system, "fit")  # type: ignore[arg-type]
    opt = MuSGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    ema = ModelEMA(model, tau=1.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    callback.on_train_epoch_start(SimpleNamespace(current_epoch=0), system)  # type: ignore[arg-type]
    callback.on_train_batch_start(None, system)  # type: ignore[arg-type]
    out = model(torch.rand(2, 3, 64, 64))
    (out["o2m"]["logits"].sigmoid().mean() + out["o2m"]["boxes"].mean()).backward()
    opt.step()
    ema.update(model)
    after = model.state_dict()
    frozen = [k for k in before if k.startswith("backbone.")]
    assert any("running_mean" in k for k in frozen) and any("num_batches_tracked" in k for k in frozen)
    assert all(torch.equal(before[k], after[k]) for k in frozen)
    assert all(torch.equal(before[k], ema.shadow[k]) for k in frozen)
    assert not torch.equal(before["neck.out3.cv1.bn.running_mean"], after["neck.out3.cv1.bn.running_mean"])
    assert not torch.equal(before["neck.out3.cv1.conv.weight"], after["neck.out3.cv1.conv.weight"])


def test_freeze_epochs_releases_the_modules():
    from lucidyolo.engine.loop.freeze import FreezeCallback, frozen_modules

    model = create_model("n", num_classes=2)
    callback = FreezeCallback([n for n, _ in frozen_modules(model, "neck")], epochs=2)
    system = SimpleNamespace(model=model, training=True)
    callback.setup(None, system, "fit")  # type: ignore[arg-type]
    stem = model.backbone.stem[0].conv.weight
    assert stem.requires_grad  # handed to the optimizer: released later without a new parameter group
    callback.on_train_epoch_start(SimpleNamespace(current_epoch=1), system)  # type: ignore[arg-type]
    assert not stem.requires_grad and not model.neck.out5.cv1.conv.weight.requires_grad
    assert model.head.o2m.stems["logits"].outputs["logits"][0].weight.requires_grad
    callback.on_train_epoch_start(SimpleNamespace(current_epoch=2), system)  # type: ignore[arg-type]
    assert stem.requires_grad and model.backbone.stem[0].training


def test_freezing_more_trunk_modules_than_exist_is_refused():
    from lucidyolo.engine.loop.freeze import frozen_modules

    with pytest.raises(ConfigError, match="more modules than the trunk has"):
        frozen_modules(create_model("n", 2), 18)
