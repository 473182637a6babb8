"""The one validation loop over a split outside training: letterboxed batches of ground truth, on a device.

The gates' scores, the COCO protocol of ``lucid eval`` and the plugins'
``evaluate`` hooks all read a split the same way: :class:`ValDataset`
(letterbox, no augmentation), the packed batch transport, then
:func:`~lucidyolo.structures.packed.unpack` onto the device. Training's
validation goes through Lightning with the same dataset and loader.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


class FirstItems:
    """The first ``n`` items of a dataset (the sampler yields ``(epoch, index)`` pairs, which Subset rejects)."""

    def __init__(self, dataset: Any, n: int) -> None:
        self.dataset = dataset
        self.n = max(0, min(n, len(dataset)))
        self.img_size = dataset.img_size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: Any) -> Any:
        return self.dataset[item]


def val_batches(
    source: Any, img_size: int, batch_size: int, fields: Sequence[str], device: Any = "cpu", *,
    limit: int | None = None, workers: int = 0,
) -> Iterator[tuple[Any, dict[str, Any], dict[str, Any]]]:
    """``(images (B, 3, S, S) float in [0, 1], gt, meta)`` per batch of the split's first ``limit`` images.

    ``gt`` is the padded ground truth of the task's ``fields`` and ``meta`` the
    batch meta (``index (B,)``, ``orig_hw (B, 2)``, ``letterbox (B, 3)``), as
    :func:`~lucidyolo.structures.packed.unpack` gives them on ``device``.
    """
    from lucidyolo.data.datasets import ValDataset
    from lucidyolo.data.loader import build_val_loader
    from lucidyolo.structures.packed import unpack

    dataset: Any = ValDataset(source, img_size)
    if limit is not None:
        dataset = FirstItems(dataset, limit)
    for batch in build_val_loader(dataset, batch_size, tuple(fields), val_num_workers=workers):
        yield unpack(batch, device)
