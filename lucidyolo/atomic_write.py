"""Atomic file writes: a crash never leaves a truncated file where a complete one was expected.

Write to a temporary file in the destination folder, flush and fsync it, rename it
over the destination, then fsync the folder so the rename itself is durable.
Torch-free, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
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
            if os.name == "posix":  # renamed while still open and locked: never seen unlocked under its temporary name
                os.replace(tmp, dest)
        if os.name != "posix":  # Windows renames no open file
            os.replace(tmp, dest)
    except BaseException as exc:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
        if isinstance(exc, OSError) and (exc.filename is None or Path(str(exc.filename)).name.startswith(f".{dest.name}.")):
            exc.filename = str(dest)  # the file the user asked for, not our temporary name
        raise
    fsync_dir(dest.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """``Path.write_text`` through :func:`atomic_open`: ``path`` holds the old text or the new, never part of it."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)
    return Path(path)


def _create_temporary(dest: Path, names: list[str]) -> tuple[int, str]:
    """Create ``.<name>.<random>.tmp`` beside ``dest`` (``O_EXCL``, mode ``0o666`` less the umask), locked.

    Each name is appended to ``names`` before the file is created, so a
    signal raised between the ``open`` and the caller's assignment (where
    ``tempfile.mkstemp`` would return a file nobody knows about) still finds
    it to remove. The file is held under an exclusive ``flock`` until it is renamed,
    which tells :func:`remove_abandoned` that its writer is alive; a file that
    :func:`remove_abandoned` took between our ``open`` and our lock is given up for another name.
    """
    for _ in range(100):
        name = str(dest.parent / f".{dest.name}.{secrets.token_hex(TOKEN_BYTES)}.tmp")
        names.append(name)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            names.pop()
            continue
        if _lock(fd) is not False and _same_file(fd, name):
            return fd, name
        os.close(fd)  # a cleaner holds it or removed it: it is the cleaner's to remove
        names.pop()
    raise FileExistsError(f"no free temporary name beside {dest}")


TOKEN_BYTES = 6
TEMPORARY = re.compile(rf"^\.(?P<name>.+)\.[0-9a-f]{{{2 * TOKEN_BYTES}}}\.tmp$")
"""The name :func:`atomic_open` gives its temporary file: ``.<destination name>.<random hex>.tmp``."""

UNLOCKED_STALE_AFTER_S = 600
"""Where a file cannot be locked (no ``fcntl``, a filesystem without locks), a temporary untouched this
long is taken as abandoned: a live atomic write touches its file every few seconds at most."""


def _lock(fd: int) -> bool | None:
    """Take an exclusive ``flock`` on ``fd`` without waiting: True, False (another holds it), None (cannot lock here)."""
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EOPNOTSUPP, EBADF (NFS emulates flock with locks that need write access)
        return None
    return True


def _same_file(fd: int, name: str) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(name)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def temporaries(folder: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The temporary files of :func:`atomic_open` in ``folder`` whose destination name ``wanted`` accepts."""
    if not folder.is_dir():
        return []
    found = []
    for entry in os.scandir(folder):
        match = TEMPORARY.match(entry.name)
        if match and wanted(match["name"]) and entry.is_file(follow_symlinks=False):
            found.append(Path(entry.path))
    return sorted(found)


def remove_abandoned(paths: Iterable[Path]) -> tuple[list[Path], int]:
    """Remove the temporary files among ``paths`` that no live process is writing; returns (those removed, bytes).

    A writer holds its temporary under an exclusive ``flock`` until the rename, and the kernel drops
    the lock when the writer dies, however it dies (SIGKILL included): a file we can lock is abandoned.
    Where locks are not available, a file untouched for :data:`UNLOCKED_STALE_AFTER_S` is.
    """
    removed: list[Path] = []
    size = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except PermissionError:
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue
        except OSError:  # gone already (its writer renamed it)
            continue
        try:
            locked = _lock(fd)
            info = os.fstat(fd)
            if locked is False or (locked is None and time.time() - info.st_mtime < UNLOCKED_STALE_AFTER_S):
                continue
            try:
                os.unlink(path)
            except OSError:
                continue
            removed.append(path)
            size += info.st_size
        finally:
            os.close(fd)  # drops our lock
    return removed, size


def fsync_dir(folder: Path) -> None:
    """Persist a rename in ``folder``; not possible on Windows (directories cannot be opened)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
