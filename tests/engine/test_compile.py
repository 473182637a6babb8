"""The objective region compiles as one graph (eager backend on CPU) for batches with and without GTs."""

from __future__ import annotations

import warnings

import pytest
import torch

from lucidyolo.tasks.registry import get_task


@pytest.fixture(scope="module")
def system():
    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.engine.loop.build import build_system
    from lucidyolo.tasks.registry import get_task

    spec = get_task("det")
    torch.manual_seed(0)
    return build_system(spec, resolve_config(spec), 4, ["a", "b", "c", "d"])


def _gt(with_boxes: bool) -> dict[str, torch.Tensor]:
    if not with_boxes:
        return {"boxes": torch.zeros(2, 0, 4), "labels": torch.zeros(2, 0, dtype=torch.long),
                "mask": torch.zeros(2, 0, dtype=torch.bool)}
    return {"boxes": torch.tensor([[[4.0, 4.0, 30.0, 30.0], [0, 0, 0, 0]], [[10.0, 10.0, 50.0, 40.0], [2, 2, 9, 9]]]),
            "labels": torch.tensor([[1, 0], [2, 3]]), "mask": torch.tensor([[True, False], [True, True]])}


@pytest.mark.parametrize("with_boxes", [True, False], ids=["gts", "no-gt"])
def test_objective_region_has_no_graph_breaks(system, with_boxes):
    import torch._dynamo as dynamo

    images = torch.rand(2, 3, 64, 64)
    explained = dynamo.explain(system.objective)(images, _gt(with_boxes), 0.5)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_compiled_objective_equals_eager(system):
    torch._dynamo.reset()
    compiled = torch.compile(system.objective, backend="eager", dynamic=True)
    images = torch.rand(2, 3, 64, 64)
    for with_boxes in (True, False):
        gt = _gt(with_boxes)
        total_c, terms_c = compiled(images, gt, 0.3)
        total_e, terms_e = system.objective(images, gt, 0.3)
        torch.testing.assert_close(total_c, total_e)
        assert terms_c.keys() == terms_e.keys()


def test_compile_step_outside_cuda_warns_once_and_stays_eager():
    import lucidyolo.engine.loop.fit as fit

    fit._warned_compile = False
    with pytest.warns(UserWarning, match="compile_step is ignored"):
        assert fit.should_compile(True, get_task("det"), cuda=False) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fit.should_compile(True, get_task("det"), cuda=False) is False  # only once
    assert fit.should_compile(True, get_task("det"), cuda=True) is True
    assert fit.should_compile(False, get_task("det"), cuda=True) is False
