"""Probes of the shared-memory filesystem the loader's batches travel through.

In-flight batches live in POSIX shared memory (/dev/shm), one segment per
tensor, allocated in whole pages. :mod:`lucidyolo.data.worker_plan` budgets
the worker counts against what these probes report.
"""

from __future__ import annotations

import mmap
import os

SHM_PATH = "/dev/shm"
SHM_FRACTION = 0.5
"""The automatic worker count uses at most half of the free /dev/shm: other
processes use it too, and the probe is one moment's reading."""


def shm_free_bytes(path: str = SHM_PATH) -> int | None:
    """Free bytes of the shared-memory filesystem, or ``None`` when the host has none."""
    try:
        st = os.statvfs(path)
    except (FileNotFoundError, NotADirectoryError, PermissionError, OSError):
        return None
    return int(st.f_bavail) * int(st.f_frsize)


def shm_page_size() -> int:
    """Allocation unit of a shared-memory segment (the memory page)."""
    return mmap.PAGESIZE


def local_world_size() -> int:
    """Training processes on this host (``LOCAL_WORLD_SIZE``, set by Lightning/torchrun; default 1)."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1
