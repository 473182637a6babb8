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
