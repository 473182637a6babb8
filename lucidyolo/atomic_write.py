"""Atomic file writes: a crash never leaves a truncated file where a complete one was expected.

Write to a temporary file in the destination folder, flush and fsync it, rename it
over the destination, then fsync the folder so the rename itself is durable.
Torch-free, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "wb", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open a temporary file that replaces ``path`` only when the block completes.

    Args:
        path: destination; its folder is created if needed.
        mode: a write mode (``"wb"``, ``"w"``).
        **kwargs: passed to ``os.fdopen`` (e.g. ``encoding``, ``newline``).

    On any exception (KeyboardInterrupt included) the temporary file is removed and
    the previous file at ``path``, if any, is left untouched; an ``OSError`` that names
    no file (a ``write`` on a full disk) or the temporary one is given ``path`` as its filename.

    The file gets the mode a plain ``open`` would (``0o666`` less the umask), not
    ``mkstemp``'s ``0o600``: colleagues on a shared server read checkpoints and
    ``results.csv`` like the rest of the run.
    """
    dest = Path(path)
    tmp = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if isinstance(exc, OSError) and (exc.filename is None or Path(str(exc.filename)).name.startswith(f".{dest.name}.")):
            exc.filename = str(dest)  # the file the user asked for, not our temporary name
        raise
    fsync_dir(dest.parent)


_umask_lock = threading.Lock()


def current_umask() -> int:
    """The process umask (read by setting and restoring it: POSIX has no read-only call)."""
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    """Persist a rename in ``folder``; not possible on Windows (directories cannot be opened)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
