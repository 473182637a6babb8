"""Decoded-image cache (``data.cache_train_images``).

Every distinct training file is decoded once at setup into ONE contiguous
uint8 buffer plus an offset table (numpy arrays only, no per-image Python
objects). Under ``fork`` the workers share those pages copy-on-write: lookups
only read them, so the cache exists once per process tree. Under
``spawn``/``forkserver`` the dataset is pickled into each worker (per epoch
unless workers persist).

RAM budget: ``sum(3 * H * W)`` bytes over the distinct training images, per
training process (one per device under DDP), e.g. COCO train2017 at its
native size is ~76 GB per process. :func:`cache_bytes` computes it from the
image headers before anything is decoded. Validation is never cached.
Lookups return read-only views: augmentation always renders into fresh
storage and can never write into the cache.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lucidyolo.data.source import ImageSource


def cache_bytes(source: ImageSource) -> int:
    """RAM the cache of ``source`` will take: ``sum(3 * H * W)`` over its distinct files."""
    keys = [str(source.image_path(i)) for i in range(len(source))]
    _, first = np.unique(np.array(keys, dtype=object), return_index=True)
    hw = source.all_hw()[first].astype(np.int64)
    return int((3 * hw[:, 0] * hw[:, 1]).sum())


class DecodedImageCache:
    """Decoded RGB uint8 images of one source, keyed by file path.

    Args:
        source: the training split.
        decode: ``path -> (H, W, 3) uint8``; defaults to the source's own loader.
    """

    def __init__(self, source: ImageSource, decode: Callable[[int], np.ndarray] | None = None) -> None:
        decode = decode or source.load_image
        keys = np.array([str(source.image_path(i)) for i in range(len(source))], dtype=object)
        uniq, first, slot_of_index = np.unique(keys, return_index=True, return_inverse=True)
        self.num_files = int(uniq.shape[0])
        # Decode each distinct file once; sizes come from the decoded arrays
        # (headers can disagree with EXIF-less decoders for exotic files).
        decoded = [decode(int(i)) for i in first]
        shapes = np.array([d.shape[:2] for d in decoded], dtype=np.int64).reshape(-1, 2)
        sizes = 3 * shapes[:, 0] * shapes[:, 1]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        buffer = np.empty(int(offsets[-1]), dtype=np.uint8)
        for k, d in enumerate(decoded):
            buffer[offsets[k] : offsets[k + 1]] = np.ascontiguousarray(d, dtype=np.uint8).reshape(-1)
        buffer.flags.writeable = False
        self._buffer = buffer
        self._offsets = offsets
        self._shapes = shapes
        self._slot = slot_of_index.astype(np.int64).reshape(-1)

    @property
    def nbytes(self) -> int:
        """Bytes held (the documented ``sum(3 * H * W)``)."""
        return int(self._buffer.nbytes)

    def __len__(self) -> int:
        return int(self._slot.shape[0])

    def get(self, index: int) -> np.ndarray:
        """Decoded image of source index ``index``: read-only ``(H, W, 3)`` uint8 view."""
        k = int(self._slot[index])
        h, w = self._shapes[k]
        return self._buffer[self._offsets[k] : self._offsets[k + 1]].reshape(int(h), int(w), 3)
