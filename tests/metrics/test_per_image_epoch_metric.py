"""PerImageEpochMetric: the per-image bookkeeping the rotated and OKS epoch metrics share, by hand on two images."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import torch
from torch import Tensor

from lucidyolo.metrics.per_image_epoch_metric import (
    ImageRows,
    PerImageEpochMetric,
    as_bool,
    as_float64,
)
from lucidyolo.tasks.keypoints.epoch_map import OKSEpochMAP
from lucidyolo.tasks.obb.epoch_map import RotatedEpochMAP


class _Counts(PerImageEpochMetric):
    """Predicted rows: ``(B, N)`` scores, 0 padding; ground truth: ``labels (B, M)`` + ``mask``.

    Score: real predictions and real ground truths over the images kept, and the
    sum of the kept scores; nothing to score when no image has ground truth.
    """

    keys = ("rows", "truths", "score_sum")

    def image_rows(self, decoded: Tensor, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor]) -> list[ImageRows]:
        scores, mask, labels = as_float64(decoded), as_bool(gt["mask"]), as_float64(gt["labels"])
        return [ImageRows((s[s > 0],), (lab[m],)) for s, m, lab in zip(scores, mask, labels, strict=True)]

    def score(self, images: Mapping[int, ImageRows]) -> dict[str, Tensor] | None:
        truths = sum(r.truth[0].size for r in images.values())
        if truths == 0:
            return None
        self.last_result = list(images)
        return {"rows": torch.tensor(float(sum(r.predicted[0].size for r in images.values()))),
                "truths": torch.tensor(float(truths)),
                "score_sum": torch.tensor(float(sum(r.predicted[0].sum() for r in images.values())))}


def _batch(scores: list[list[float]], labels: list[list[int]]) -> tuple[Tensor, dict[str, Tensor]]:
    """A batch: score rows ``(B, 3)`` (0 padding), labels ``(B, 2)`` with -1 as padding."""
    lab = torch.tensor(labels)
    return torch.tensor(scores), {"labels": lab.clamp(min=0), "mask": lab >= 0}


def test_the_rotated_and_oks_metrics_are_per_image_epoch_metrics() -> None:
    assert issubclass(RotatedEpochMAP, PerImageEpochMetric)
    assert issubclass(OKSEpochMAP, PerImageEpochMetric)
    for metric in (RotatedEpochMAP(num_classes=2), OKSEpochMAP(5)):
        assert metric.state_dict() == {}  # nothing of it travels in a checkpoint
        zero = metric.compute()
        assert list(zero) == list(type(metric).keys) and metric.last_result is None
        assert all(v.dtype == torch.float32 and float(v) == 0.0 for v in zero.values())


def test_two_images_keep_their_first_record_in_first_seen_order() -> None:
    metric = _Counts()
    # image 9: rows 0.5 and 0.25, truths [1]; image 4: row 0.75, truths [0, 2]
    metric.update(*_batch([[0.5, 0.0, 0.25], [0.75, 0.0, 0.0]], [[1, -1], [0, 2]]), {"index": torch.tensor([9, 4])})
    # image 4 again with other rows (a repeated image): ignored
    metric.update(*_batch([[0.125, 0.125, 0.125]], [[3, 3]]), {"index": torch.tensor([4])})
    assert list(metric._images) == [9, 4]
    assert metric._images[4].predicted[0].tolist() == [0.75] and metric._images[4].truth[0].tolist() == [0.0, 2.0]
    out = metric.compute()
    # 3 real rows, 3 real truths, 0.5 + 0.25 + 0.75 = 1.5
    assert {k: float(v) for k, v in out.items()} == {"rows": 3.0, "truths": 3.0, "score_sum": 1.5}
    assert metric.last_result == [9, 4]
    assert metric.compute().keys() == out.keys()  # compute does not consume the records


def test_without_an_index_every_image_is_new_and_reset_forgets() -> None:
    metric = _Counts()
    decoded, gt = _batch([[0.5, 0.0, 0.0], [0.25, 0.0, 0.0]], [[0, -1], [1, -1]])
    metric.update(decoded, gt, {})
    metric.update(decoded, gt, {})  # the same pictures again, but nothing says so
    assert list(metric._images) == [0, 1, 2, 3]
    assert float(metric.compute()["score_sum"]) == 1.5
    metric.reset()
    assert metric._images == {} and metric._seen == 0
    out = metric.compute()
    assert {k: float(v) for k, v in out.items()} == {"rows": 0.0, "truths": 0.0, "score_sum": 0.0}
    assert metric.last_result is None  # the previous scoring is dropped


def test_nothing_to_score_returns_zeros_and_clears_the_last_result() -> None:
    metric = _Counts()
    metric.update(*_batch([[0.5, 0.0, 0.0]], [[0, -1]]), {"index": torch.tensor([0])})
    metric.compute()
    assert metric.last_result == [0]
    metric.reset()
    metric.update(*_batch([[0.5, 0.0, 0.0]], [[-1, -1]]), {"index": torch.tensor([0])})  # no ground truth
    assert all(float(v) == 0.0 for v in metric.compute().values()) and metric.last_result is None


def test_an_index_that_does_not_match_the_batch_is_refused() -> None:
    metric = _Counts()
    with pytest.raises(ValueError):
        metric.update(*_batch([[0.5, 0.0, 0.0]], [[0, -1]]), {"index": torch.tensor([0, 1])})
