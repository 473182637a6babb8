"""Progressive o2m/o2o mix: the alpha schedule and the mixed terms."""

from __future__ import annotations

import pytest
import torch

from lucidyolo.losses import mix_branches, progressive_alpha


def test_progressive_alpha_goes_from_08_to_01_linearly() -> None:
    assert progressive_alpha(0, 10) == pytest.approx(0.8)
    assert progressive_alpha(9, 10) == pytest.approx(0.1)
    assert progressive_alpha(3, 7) == pytest.approx(0.5 * 0.7 + 0.1)
    assert progressive_alpha(25, 10) == pytest.approx(0.1)  # past the end: stays at the floor
    assert progressive_alpha(0, 1) == pytest.approx(0.8)  # E = 1: max(E - 1, 1) avoids 0 / 0
    steps = [progressive_alpha(e, 11) for e in range(11)]
    assert all(a > b for a, b in zip(steps, steps[1:], strict=False))


def test_progressive_alpha_rejects_negative_epochs() -> None:
    with pytest.raises(ValueError):
        progressive_alpha(-1, 5)
    with pytest.raises(ValueError):
        progressive_alpha(0, 0)


def test_mix_branches_weights_every_term_and_keeps_branch_terms() -> None:
    o2m = {
        "box": torch.tensor(1.0),
        "cls": torch.tensor(2.0),
        "l1": torch.tensor(3.0),
        "total": torch.tensor(10.0),
        "num_fg": torch.tensor(30.0),
    }
    o2o = {
        "box": torch.tensor(5.0),
        "cls": torch.tensor(6.0),
        "l1": torch.tensor(7.0),
        "total": torch.tensor(20.0),
        "num_fg": torch.tensor(3.0),
    }
    total, terms = mix_branches(o2m, o2o, 0.8)
    assert total.item() == pytest.approx(0.8 * 10 + 0.2 * 20)
    assert terms["box"].item() == pytest.approx(0.8 * 1 + 0.2 * 5)
    assert terms["o2o/l1"].item() == 7.0 and terms["o2m/num_fg"].item() == 30.0
    assert "num_fg" not in terms and "total" not in terms
    tensor_total, _ = mix_branches(o2m, o2o, torch.tensor(0.8))
    assert tensor_total.item() == pytest.approx(total.item())


@pytest.mark.parametrize("task", ["det", "seg", "obb", "keypoints"])
def test_the_alpha_schedule_is_the_tasks_dual_head_option(task) -> None:
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    cfg = spec.run_config.model_validate({"model": {"task": task, "alpha_start": 0.5, "alpha_end": 0.2}}).model
    criterion = spec.build_criterion(cfg=cfg, num_classes=2, meta={"num_keypoints": 3})
    # E = 5: a(e) = (1 - e / 4) * (0.5 - 0.2) + 0.2
    assert [criterion.epoch_weight(e, 5) for e in (0, 2, 4, 9)] == pytest.approx([0.5, 0.35, 0.2, 0.2])
    default = spec.build_criterion(cfg=spec.config_model(task=task), num_classes=2, meta={"num_keypoints": 3})
    assert default.epoch_weight(0, 10) == pytest.approx(0.8) and default.epoch_weight(9, 10) == pytest.approx(0.1)


def test_a_criterion_without_a_schedule_gets_weight_one() -> None:
    from lucidyolo.engine.loop.system import TrainingSystem

    system = TrainingSystem(torch.nn.Identity(), torch.nn.Identity(), lambda **_: None, torch.nn.Identity(),
                            lambda **_: None, (), config={}, decode_path="e2e")
    assert system.alpha == 1.0 and system._epoch_weight(3, 10) == 1.0
