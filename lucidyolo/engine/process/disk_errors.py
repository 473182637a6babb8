"""Disk faults while a run writes: a full, read-only or forbidden filesystem becomes one message (exit 2).

Whatever writes (the run folder's claim, ``config.yaml``, a checkpoint, ``results.csv``,
a logger), the cause is the same ``OSError`` somewhere in the exception's chain;
Lightning and torch wrap it in their own exceptions, which printed a chained
traceback of hundreds of lines. Checkpoints are written atomically, so the previous
``last.ckpt`` survives any of these faults and the message can name the resume command.
Torch-free.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from lucidyolo.errors import UserError

T = TypeVar("T")

WRITE_FAULTS: dict[int, str] = {
    errno.ENOSPC: "the filesystem is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the filesystem is mounted read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "the file would exceed the largest size allowed",
}
"""The errno values that mean "this location cannot take the write", with the words for them."""


def find_write_fault(exc: BaseException) -> OSError | None:
    """The first ``OSError`` with a :data:`WRITE_FAULTS` errno in ``exc``'s cause / context chain."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in WRITE_FAULTS:
            return e
        todo += [e.__cause__, e.__context__]
    return None


def free_space(path: Path) -> str:
    """``'1.2 MB free of 64.0 MB'`` for the filesystem holding ``path`` (its nearest existing folder)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        usage = shutil.disk_usage(p)
    except OSError:
        return "free space unknown"
    return f"{usage.free / 1e6:.1f} MB free of {usage.total / 1e6:.1f} MB"


SPACE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""The faults free space cures; for the others (read-only, forbidden) the free space is beside the point."""


def fault_reason(fault: OSError, where: Path) -> str:
    """Why ``where`` could not take the write, in terms of what the user can change.

    A full disk: the free space. A read-only filesystem: that, not the space. A forbidden write: the
    owner and mode of the nearest existing folder against this process's user.
    """
    if fault.errno in SPACE_FAULTS:
        return f"{free_space(where)} on its filesystem"
    if fault.errno == errno.EROFS:
        return "the filesystem holding it is mounted read-only (its free space does not matter)"
    folder = Path(where).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        st = folder.stat()
    except OSError:
        return "this user may not write there"
    return (f"{folder} belongs to user {st.st_uid} with mode {st.st_mode & 0o7777:04o}, and this process runs as "
            f"user {os.geteuid()}")


def _cure(fault: OSError, where: Path) -> str:
    if fault.errno in SPACE_FAULTS:
        return "free space"
    return f"make {where} writable"


def disk_error(exc: BaseException, run: Any, task: str, path: Path | None = None) -> UserError | None:
    """A :class:`UserError` naming the path, the cause, the free space and the resume command; ``None`` if
    ``exc`` is not a write fault.

    Args:
        run: the :class:`~lucidyolo.engine.run.run_dir.RunDir` (``None`` before it exists).
        path: where the failed write went, when the caller knows better than the exception.
    """
    fault = find_write_fault(exc)
    if fault is None:
        return None
    where = Path(fault.filename) if fault.filename else path or (run.path if run is not None else Path.cwd())
    command = run.resume_command(task) if run is not None and not getattr(run, "pending", False) else None
    if command:
        fix = (f"Nothing is lost: the last finished epoch's checkpoint is intact. {_cure(fault, where.parent).capitalize()}, "
               f"then continue with `{command}`.")
    else:
        fix = (f"No epoch had finished, so there is nothing to resume: {_cure(fault, where.parent)} (or choose "
               "another --trainer.default_root_dir), then start the run again.")
    return UserError(
        f"Cannot write {where}: {WRITE_FAULTS[fault.errno]} ({os.strerror(fault.errno)}).",  # type: ignore[index]
        why=f"{fault_reason(fault, where)}; the run stopped where it could not save.",
        fix=fix,
    )


def write_fault_error(exc: BaseException) -> UserError | None:
    """The message for a write fault outside a training run (eval, predict, export, tile); ``None`` if none."""
    fault = find_write_fault(exc)
    if fault is None:
        return None
    where = Path(fault.filename) if fault.filename else Path.cwd()
    verb = "access" if fault.errno in (errno.EACCES, errno.EPERM) else "write"
    return UserError(
        f"Cannot {verb} {where}: {WRITE_FAULTS[fault.errno]} ({os.strerror(fault.errno)}).",  # type: ignore[index]
        why=f"{fault_reason(fault, where)}.",
        fix=(f"{_cure(fault, where.parent).capitalize()} or choose another location, then run the command again: the files it had finished "
             "are whole (each is written to a temporary file and renamed) and its inputs were not touched."),
    )


def writing(action: Callable[[], T], path: Path, run: Any, task: str = "") -> T:
    """``action()``, with a write fault turned into :func:`disk_error`'s message about ``path``."""
    try:
        return action()
    except OSError as exc:
        if (err := disk_error(exc, run, task, path)) is not None:
            raise err from None
        raise
