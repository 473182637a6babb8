"""faster-coco-eval scores COCO results exactly as pycocotools does (issue 35, item 4).

The cases come from :mod:`tests.metrics.coco_random_case`; the oracle is
pycocotools itself.
"""

from __future__ import annotations

import pytest

from lucidyolo.errors import UserError
from lucidyolo.metrics import coco_backend
from lucidyolo.metrics.coco_eval import evaluate_coco
from tests.metrics.coco_random_case import SIGMAS, only_iou_type, random_coco_case

pytest.importorskip("faster_coco_eval", reason="faster-coco-eval is not installed (the fast-eval extra)")


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("iou_type", ["bbox", "segm", "keypoints"])
def test_faster_coco_eval_matches_pycocotools(iou_type: str, seed: int) -> None:
    gt, dets = random_coco_case(seed)
    dets = only_iou_type(dets, iou_type)
    sigmas = SIGMAS if iou_type == "keypoints" else None
    ref = evaluate_coco(gt, dets, iou_type=iou_type, kpt_oks_sigmas=sigmas, backend="pycocotools")
    fast = evaluate_coco(gt, dets, iou_type=iou_type, kpt_oks_sigmas=sigmas, backend="faster_coco_eval")
    assert ref.backend == "pycocotools" and fast.backend == "faster_coco_eval"
    assert 0.02 < ref.stats["AP"] < 0.99  # a case with something to get wrong
    for name, value in ref.stats.items():
        assert fast.stats[name] == pytest.approx(value, abs=1e-6), name
    for a, b in zip(ref.per_class, fast.per_class, strict=True):
        assert (a.category_id, a.num_gt) == (b.category_id, b.num_gt)
        assert b.ap == pytest.approx(a.ap, abs=1e-6) and b.ap50 == pytest.approx(a.ap50, abs=1e-6)


def test_no_detections_score_zero_with_either_backend() -> None:
    gt, _ = random_coco_case(2, n_images=5)
    for backend in ("pycocotools", "faster_coco_eval"):
        assert evaluate_coco(gt, [], backend=backend).stats["AP"] in (0.0, -1.0)


def test_auto_takes_the_fast_backend_when_installed_and_context_sets_it() -> None:
    assert coco_backend.resolve_backend("auto") == "faster_coco_eval"
    gt, dets = random_coco_case(3, n_images=6)
    with coco_backend.using_backend("pycocotools") as chosen:
        assert chosen == "pycocotools"
        assert evaluate_coco(gt, only_iou_type(dets, "bbox")).backend == "pycocotools"
    assert evaluate_coco(gt, only_iou_type(dets, "bbox")).backend == "faster_coco_eval"


def test_unknown_or_missing_backend_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UserError, match="Unknown COCO scoring backend"):
        coco_backend.resolve_backend("cocoapi")
    monkeypatch.setattr(coco_backend, "faster_available", lambda: False)
    assert coco_backend.resolve_backend("auto") == "pycocotools"
    with pytest.raises(UserError, match="not installed") as info:
        coco_backend.resolve_backend("faster_coco_eval")
    assert "--coco-backend pycocotools" in info.value.fix
