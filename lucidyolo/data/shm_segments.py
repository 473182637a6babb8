"""Shared-memory segments torch leaves in /dev/shm, and removing the ones our processes left.

With the file-descriptor sharing strategy (the Linux default) torch creates a
segment ``/dev/shm/torch_<pid>_<random>_<n>`` and unlinks it as soon as it is
mapped, so a healthy run leaves nothing. When the allocation fails
(``posix_fallocate``: "No space left on device") torch raises *before* the
unlink and the file stays until reboot (measured: one file per failed
allocation, apparent size the batch); so does a segment whose worker was
killed between the two calls. Such a file carries the pid of the process that
created it; once that process has exited nothing can map it any more, so
removing it is safe. Files of other processes are never touched.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterable
from pathlib import Path

from lucidyolo.data.shm import SHM_PATH

_tracked: set[int] = set()
_registered = False


def segment_files(pid: int, root: str = SHM_PATH) -> list[Path]:
    """The torch segments in ``root`` created by process ``pid``."""
    return sorted(Path(root).glob(f"torch_{int(pid)}_*"))


def _exited(pid: int) -> bool:
    # a zombie (exited, not yet reaped) counts as exited: it cannot map anything any more
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def track(pids: Iterable[int]) -> None:
    """Remember loader worker pids; their leftovers (and ours) are removed at exit at the latest."""
    global _registered
    _tracked.update(int(p) for p in pids)
    if not _registered:
        _registered = True
        atexit.register(_at_exit)


def remove_leftovers(pids: Iterable[int] | None = None, root: str = SHM_PATH) -> list[str]:
    """Delete the segments of exited processes among ``pids`` (default: every tracked worker).

    The calling process's own pid is honoured only when passed explicitly (at exit).

    Returns:
        The names removed.
    """
    removed = []
    for pid in sorted(_tracked if pids is None else set(pids)):
        if pid != os.getpid() and not _exited(pid):
            continue
        for path in segment_files(pid, root):
            try:
                path.unlink()
                removed.append(path.name)
            except FileNotFoundError:
                continue
            except OSError:  # not ours to delete after all (permissions): leave it
                continue
    return removed


def _at_exit() -> None:
    import torch.multiprocessing as mp

    pids = set(_tracked)
    if mp.get_sharing_strategy() == "file_descriptor":
        # under this strategy a live segment has no file, so a file with our pid is always a leftover
        pids.add(os.getpid())
    remove_leftovers(pids)
