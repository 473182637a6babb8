"""Atomic file writes: a crash never leaves a truncated file where a complete one was expected.

Write to a temporary file in the destination folder, flush and fsync it, rename it
over the destination, then fsync the folder so the rename itself is durable.
Torch-free, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
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
    names: list[str] = []  # the temporary name is known before the file exists: a stop in between leaves nothing
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_temporary(dest, names)
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException as exc:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
        if isinstance(exc, OSError) and (exc.filename is None or Path(str(exc.filename)).name.startswith(f".{dest.name}.")):
            exc.filename = str(dest)  # the file the user asked for, not our temporary name
        raise
    fsync_dir(dest.parent)


def _create_temporary(dest: Path, names: list[str]) -> tuple[int, str]:
    """Create ``.<name>.<random>.tmp`` beside ``dest`` (``O_EXCL``, mode ``0o666`` less the umask).

    Each name is appended to ``names`` before the file is created, so a
    signal raised between the ``open`` and the caller's assignment (where
    ``tempfile.mkstemp`` would return a file nobody knows about) still finds
    it to remove.
    """
    for _ in range(100):
        name = str(dest.parent / f".{dest.name}.{secrets.token_hex(6)}.tmp")
        names.append(name)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            names.pop()
            continue
        return fd, name
    raise FileExistsError(f"no free temporary name beside {dest}")


def fsync_dir(folder: Path) -> None:
    """Persist a rename in ``folder``; not possible on Windows (directories cannot be opened)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
