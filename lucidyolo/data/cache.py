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
sizes the reader recorded (JSON or file headers) before anything is decoded;
the cache refuses to start when that budget, times the training processes on
this host, exceeds the memory available (a fill that does not fit would be
killed or swap part-way through, after minutes of decoding). The buffer is
allocated once at that size and each image is decoded straight into its slot,
so the peak is the buffer plus one decoded image. Validation is never cached.
Lookups return read-only views: augmentation always renders into fresh
storage and can never write into the cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from lucidyolo.data.shm import local_world_size
from lucidyolo.data.source import ImageSource
from lucidyolo.errors import ConfigError, DataError

MEMINFO_PATH = "/proc/meminfo"

AUTO_CACHE_MAX_BYTES = 1 << 30
"""``cache_train_images: auto`` caches a split whose pixels take at most this much per host (1 GiB)."""

AUTO_CACHE_MEMORY_SHARE = 4
"""... and at most 1/4 of the memory available: the rest of training keeps its room."""


class FileTable(NamedTuple):
    """The distinct files of a source (a file listed twice is decoded and cached once).

    Attributes:
        first: ``(F,)`` int64, the first source index of each distinct file.
        slot: ``(N,)`` int64, the distinct file of every source index.
        shapes: ``(F, 2)`` int64, each file's recorded ``h, w``.
    """

    first: np.ndarray
    slot: np.ndarray
    shapes: np.ndarray

    @property
    def nbytes(self) -> int:
        """``sum(3 * H * W)``: what the decoded files take."""
        return int((3 * self.shapes[:, 0] * self.shapes[:, 1]).sum())


def file_table(source: ImageSource) -> FileTable:
    """The :class:`FileTable` of ``source``, from its paths and recorded sizes (nothing is decoded)."""
    # the packed relative paths (one root): no Path per image, which took ~1 s at 10^5 images
    _, first, slot = np.unique(source.all_rel_paths(), return_index=True, return_inverse=True)
    shapes = source.all_hw()[first].astype(np.int64).reshape(-1, 2)
    return FileTable(first.astype(np.int64), slot.astype(np.int64).reshape(-1), shapes)


def cache_bytes(source: ImageSource) -> int:
    """RAM the cache of ``source`` will take: ``sum(3 * H * W)`` over its distinct files."""
    return file_table(source).nbytes


def host_available_bytes(meminfo: str = MEMINFO_PATH) -> int | None:
    """Memory a new allocation can take without swapping, or ``None`` when unknown.

    Linux: ``MemAvailable`` of ``/proc/meminfo`` (free memory plus the page cache
    the kernel can drop). Elsewhere (macOS): the physical memory size, an upper
    bound, so only a cache larger than the whole machine is refused.
    """
    try:
        with open(meminfo, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the value is in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: int) -> str:
    """Bytes in the largest decimal unit that keeps the integer part non-zero (``76.3 GB``)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def check_cache_budget(need: int, files: int, available: int | None, ranks: int = 1) -> None:
    """Refuse a cache whose bytes on this host exceed the available memory.

    Args:
        need: bytes of one process's cache (:func:`cache_bytes`).
        files: distinct files it holds (for the message).
        available: :func:`host_available_bytes`; ``None`` skips the check.
        ranks: training processes on this host, each with its own cache.

    Raises:
        ConfigError: ``need * ranks > available``.
    """
    total = need * max(1, ranks)
    if available is None or total <= available:
        return
    per = f" x {ranks} training processes on this host = {_size(total)}" if ranks > 1 else ""
    raise ConfigError(
        f"data.cache_train_images needs {_size(need)} ({files} distinct images, sum of 3*H*W bytes){per}, "
        f"but this machine has {_size(available)} of memory available.",
        why="the cache is filled at setup; a fill that does not fit is killed by the OOM killer "
        "or swaps part-way through, after minutes of decoding.",
        fix="Set --data.cache_train_images false (images are then decoded per sample), "
        "or free memory / use a machine with more RAM.",
    )


def want_auto_cache(need: int, available: int | None, ranks: int = 1) -> bool:
    """Whether ``cache_train_images: auto`` caches a split of ``need`` bytes per process.

    Yes when every training process's cache together stays within
    :data:`AUTO_CACHE_MAX_BYTES` and within ``1 / AUTO_CACHE_MEMORY_SHARE`` of the
    memory available (unknown memory: the byte cap alone). A small set is read many
    times over (four images per mosaic sample, every epoch) and decoding is most of
    a sample's cost; a large one would take minutes to fill and the RAM training needs.
    """
    total = need * max(1, ranks)
    if total > AUTO_CACHE_MAX_BYTES:
        return False
    return available is None or total * AUTO_CACHE_MEMORY_SHARE <= available


class DecodedImageCache:
    """Decoded RGB uint8 images of one source, keyed by file path.

    Args:
        source: the training split.
        decode: ``index -> (H, W, 3) uint8``; defaults to the source's own loader.
        available_bytes: memory the budget check compares against; ``"probe"``
            (default) reads it with :func:`host_available_bytes`, ``None`` skips
            the check.
        table: the source's :func:`file_table`, when the caller has it already.

    Raises:
        ConfigError: the cache would not fit in the available memory (checked
            before anything is decoded).
        DataError: a file decodes to another size than the one the reader
            recorded for it (the slot was sized from the record).
    """

    def __init__(
        self,
        source: ImageSource,
        decode: Callable[[int], np.ndarray] | None = None,
        *,
        available_bytes: int | None | str = "probe",
        table: FileTable | None = None,
    ) -> None:
        decode = decode or source.load_image
        first, slot_of_index, shapes = table if table is not None else file_table(source)
        self.num_files = int(first.shape[0])
        sizes = 3 * shapes[:, 0] * shapes[:, 1]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # (F + 1,)
        available = host_available_bytes() if isinstance(available_bytes, str) else available_bytes
        check_cache_budget(int(offsets[-1]), self.num_files, available, local_world_size())

        buffer = np.empty(int(offsets[-1]), dtype=np.uint8)
        for k, i in enumerate(first.tolist()):
            image = decode(int(i))
            h, w = int(shapes[k, 0]), int(shapes[k, 1])
            if image.shape != (h, w, 3):
                raise DataError(
                    f"{source.image_path(int(i))}: file decodes to {image.shape[0]}x{image.shape[1]} "
                    f"but the annotations say {h}x{w} (HxW).",
                    why="the image cache sizes every slot from the recorded size before decoding.",
                    fix="Correct the image's height/width in the annotations; `lucid data check` lists every mismatch.",
                )
            buffer[offsets[k] : offsets[k + 1]].reshape(h, w, 3)[...] = image  # any layout in, HWC out
            del image  # only the slot keeps the pixels: the peak stays buffer + one image
        buffer.flags.writeable = False
        self._buffer = buffer
        self._offsets = offsets
        self._shapes = shapes
        self._slot = slot_of_index

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
