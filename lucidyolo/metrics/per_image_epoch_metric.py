"""An epoch metric that keeps each validation image's rows and scores them all at once.

:class:`PerImageEpochMetric` holds what such metrics share: one record per
image (:class:`ImageRows`, small numpy arrays on the CPU) keyed by the image's
index in the split, the rule that an image seen again keeps its first record,
``reset``, and a ``compute`` that returns 0.0 for every key when there is
nothing to score. A subclass says only how one batch becomes per-image rows
(:meth:`~PerImageEpochMetric.image_rows`) and how the rows of the whole epoch
are scored (:meth:`~PerImageEpochMetric.score`).

The records stay in the process that saw them: nothing is gathered across
ranks, so a task whose metric derives from this class declares
``multi_device=False``. The class holds no parameters or buffers, so a
checkpoint stores nothing of it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor, nn


class ImageRows(NamedTuple):
    """One image's record: numpy arrays on the CPU, shapes set by the subclass.

    Attributes:
        predicted: the image's kept predictions, arrays whose first axis is
            the ``n`` predicted rows.
        truth: its real ground truth (padding dropped), arrays whose first
            axis is the ``m`` instances.
    """

    predicted: tuple[np.ndarray, ...]
    truth: tuple[np.ndarray, ...]


def as_float64(t: Tensor) -> np.ndarray:
    """``t``'s values as a float64 numpy array on the CPU, same shape."""
    return t.detach().to("cpu", torch.float64).numpy()


def as_bool(t: Tensor) -> np.ndarray:
    """``t``'s values as a bool numpy array on the CPU, same shape."""
    return t.detach().to("cpu", torch.bool).numpy()


class PerImageEpochMetric(nn.Module, ABC):
    """Per-image records over a validation epoch, scored together by ``compute``.

    Subclasses set :attr:`keys` and implement :meth:`image_rows` and
    :meth:`score`. After ``compute()``, :attr:`last_result` holds what
    :meth:`score` kept of the scoring, or ``None`` when there was nothing to
    score.
    """

    keys: ClassVar[tuple[str, ...]] = ()
    """The keys ``compute`` returns, in order (each 0.0 when there is nothing to score)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_result: Any = None
        self.reset()

    def reset(self) -> None:
        """Forget every image seen (call after ``compute`` at the end of an epoch)."""
        self._images: dict[int, ImageRows] = {}
        self._seen = 0

    def update(self, decoded: Any, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor]) -> None:
        """Add one batch of ``B`` images.

        Args:
            decoded: the batch's decoded predictions, as :meth:`image_rows` takes them.
            gt: its padded ground truth (leading axis ``B``).
            batch_meta: optional ``index (B,)``, each image's index in the
                split: an image seen again keeps its first record. Without
                it every image is new, numbered by a counter that ``reset``
                restarts.
        """
        rows = self.image_rows(decoded, gt, batch_meta)
        b = len(rows)
        index = batch_meta.get("index")
        ids = (np.arange(self._seen, self._seen + b) if index is None else as_float64(index).reshape(b)).astype(np.int64)
        self._seen += b
        for image_id, image in zip(ids.tolist(), rows, strict=True):
            self._images.setdefault(image_id, image)

    def compute(self) -> dict[str, Tensor]:
        """Score everything seen.

        Returns:
            :meth:`score`'s float32 scalar tensors; 0.0 for every key of
            :attr:`keys` when no image was seen or :meth:`score` finds nothing
            to score, so a checkpoint monitor never prefers an empty epoch.
        """
        values = self.score(self._images) if self._images else None
        if values is None:
            self.clear_results()
            return {key: torch.tensor(0.0, dtype=torch.float32) for key in self.keys}
        return values

    def clear_results(self) -> None:
        """Drop what the last scoring kept (nothing was scored)."""
        self.last_result = None

    @abstractmethod
    def image_rows(self, decoded: Any, gt: Mapping[str, Tensor], batch_meta: Mapping[str, Tensor]) -> list[ImageRows]:
        """One batch's records, one per image in batch order (``B`` of them)."""

    @abstractmethod
    def score(self, images: Mapping[int, ImageRows]) -> dict[str, Tensor] | None:
        """Score the records of the epoch (at least one), keyed by image id in first-seen order.

        Returns:
            ``{key: float32 scalar tensor}`` for every key of :attr:`keys`, or
            ``None`` when there is nothing to score (no class); sets
            :attr:`last_result` when it scores.
        """
