"""The /dev/shm budget of the loader's worker queue.

In-flight batches live in POSIX shared memory: ``workers x prefetch_factor``
batches at once. When that exceeds the free /dev/shm the pin-memory thread
dies on ``mmap`` ("Cannot allocate memory"). The automatic worker count is
therefore capped so the queue fits half the free space, shared among the
ranks on this host (several DDP ranks use one /dev/shm).
"""

from __future__ import annotations

import os

SHM_PATH = "/dev/shm"
SHM_FRACTION = 0.5
"""Use at most half of the free /dev/shm for one host's loader queues."""

TARGETS_BYTES_PER_IMAGE = 16 * 1024
"""Allowance for the packed target tensors and meta of one image (generous)."""


def shm_free_bytes(path: str = SHM_PATH) -> int | None:
    """Free bytes of the shared-memory filesystem, or ``None`` when the host has none."""
    try:
        st = os.statvfs(path)
    except (FileNotFoundError, NotADirectoryError, PermissionError, OSError):
        return None
    return int(st.f_bavail) * int(st.f_frsize)


def local_world_size() -> int:
    """Training processes on this host (``LOCAL_WORLD_SIZE``, set by Lightning/torchrun; default 1)."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def batch_nbytes(batch_size: int, img_size: int, float_images: bool = False) -> int:
    """Shared-memory bytes of one packed batch: images (uint8 or float32) plus a target allowance."""
    per_pixel = 4 if float_images else 1
    return batch_size * (3 * img_size * img_size * per_pixel + TARGETS_BYTES_PER_IMAGE)


def shm_worker_cap(batch_bytes: int, prefetch_factor: int, free_bytes: int | None, ranks: int = 1, reserved_bytes: int = 0) -> int | None:
    """Most workers whose in-flight batches fit the budget (at least 1), or ``None`` when uncapped.

    Args:
        batch_bytes: bytes of one batch (:func:`batch_nbytes`).
        prefetch_factor: batches queued per worker.
        free_bytes: free /dev/shm (``None``: no /dev/shm, no cap).
        ranks: processes on this host sharing it.
        reserved_bytes: bytes this rank already has in flight (e.g. the resident training pool).
    """
    if free_bytes is None:
        return None
    budget = free_bytes * SHM_FRACTION / max(1, ranks) - reserved_bytes
    per_worker = max(1, batch_bytes * max(1, prefetch_factor))
    return max(1, int(budget // per_worker))
