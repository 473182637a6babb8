"""Nothing half-written looks complete: staging folders, the lock on ``out``, dead-run cleanup, commit by rename.

Every split's tiles go to a staging folder of this run,
``{out}/.{split}.partial-{host}-{pid}-{random}/``; only after all splits
succeeded is each folder renamed to ``{out}/{split}`` and then its JSON written
atomically (the JSON is what makes a split readable). On any error the staging
folders are removed; one left by a killed run (its process is gone on this
host) is removed by the next run on that ``out``.

Two runs on one ``out`` at once: each stages in its own folder, and the
renames into place happen under an exclusive ``flock`` on the ``out`` folder
(held only for the renames). A run that finds its split already written by the
other keeps what is there when every tile and the JSON are byte-identical to
its own (same inputs and options), else it stops with a DataError; either way
its own staging folder is removed. A split folder without its JSON found
under the lock is a killed run's half-finished rename and is replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import filecmp
import json
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from lucidyolo.atomic_write import atomic_open
from lucidyolo.data.dota.splits import SplitInput
from lucidyolo.data.dota.summary import SplitSummary
from lucidyolo.errors import DataError


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


def _host() -> str:
    # a staging name holds it; '-' separates the name's fields
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def _staging_prefix(split: str) -> str:
    return f".{split}.partial-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def remove_dead_staging(out: Path, split: str) -> list[Path]:
    """Remove the staging folders of ``split`` left in ``out`` by killed runs on this host.

    A folder is removed only when its name says this host and its process no
    longer exists; a live run's folder, or one from another host sharing the
    folder, is left alone. Also removes ``.{split}.partial``, the fixed name
    earlier versions used. Returns the removed folders.
    """
    removed = []
    legacy = out / f".{split}.partial"
    if legacy.is_dir():
        _remove(legacy)
        removed.append(legacy)
    prefix, host = _staging_prefix(split), _host()
    for p in sorted(out.glob(f"{prefix}*")):
        parts = p.name[len(prefix) :].rsplit("-", 2)
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and not _pid_alive(int(parts[1])):
            _remove(p)
            removed.append(p)
    return removed


def new_staging(out: Path, split: str) -> Path:
    """Create this run's staging folder for ``split`` in ``out`` (after removing dead runs' ones)."""
    remove_dead_staging(out, split)
    # unique per run: two runs on one --out never write into each other's folder
    return Path(tempfile.mkdtemp(dir=out, prefix=f"{_staging_prefix(split)}{_host()}-{os.getpid()}-"))


def discard(out: Path, staging: list[Path], renamed: list[Path]) -> None:
    """After an error: remove this run's staging folders, and renamed splits whose JSON was not written."""
    for p in staging:
        _remove(p)
    # A renamed split whose JSON did not get written is incomplete too.
    for d in renamed:
        if not (out / "annotations" / f"instances_{d.name}.json").exists():
            _remove(d)


@contextlib.contextmanager
def _out_lock(out: Path):
    """Exclusive lock on ``out`` for moving splits in place; released when the process dies.

    The lock is on the folder itself, so no lock file is left among the outputs.
    """
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            # A file system without locks: the rename below still refuses a non-empty split folder.
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
        yield
    finally:
        os.close(fd)


def _same_files(a: Path, b: Path) -> bool:
    """Two flat folders hold the same file names with the same bytes."""
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def _split_taken(out: Path, split: str, staging: Path, doc_bytes: bytes) -> str | None:
    """Under the lock: ``None`` when ``out/split`` is free (or a killed run's half-rename, then removed),
    ``"identical"`` when another run wrote the same bytes, else ``"different"``."""
    dest, ann = out / split, out / "annotations" / f"instances_{split}.json"
    if dest.exists() and not ann.exists():
        _remove(dest)  # renamed by a run killed before its JSON: never readable, ours replaces it
        return None
    if not dest.exists() and not ann.exists():
        return None
    if dest.is_dir() and ann.read_bytes() == doc_bytes and _same_files(staging, dest):
        return "identical"
    return "different"


def _conflict(out: Path, split: str) -> DataError:
    return DataError(
        f"Split {split!r} in {out} was written by another `lucid data tile` run on --out {out} while this one was "
        "tiling, and its tiles differ from this run's.",
        why="tiling never overwrites a split; the other run's split is complete and was kept, this run's tiles were discarded.",
        fix=f"Use the other run's split, or remove {out / split} and {out / 'annotations' / f'instances_{split}.json'} "
        "and tile again (or pick another --out).",
    )


def commit(out: Path, inputs: list[SplitInput], partials: list[Path], docs: list[dict[str, Any]],
            summaries: list[SplitSummary], renamed: list[Path]) -> None:  # fmt: skip
    """Move every split into place under the lock: all or none (see the module docstring)."""
    encoded = [
        (json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8") for doc in docs
    ]
    with _out_lock(out):
        taken = [_split_taken(out, si.split, p, b) for si, p, b in zip(inputs, partials, encoded, strict=True)]
        for si, state in zip(inputs, taken, strict=True):
            if state == "different":
                raise _conflict(out, si.split)
        (out / "annotations").mkdir(exist_ok=True)
        for si, p, doc_bytes, summ, state in zip(inputs, partials, encoded, summaries, taken, strict=True):
            dest = out / si.split
            ann = out / "annotations" / f"instances_{si.split}.json"
            if state == "identical":
                _remove(p)
                summ.kept_identical = True
            else:
                try:
                    os.rename(p, dest)
                except OSError as exc:  # only without a working lock: another run renamed first
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                        raise _conflict(out, si.split) from None
                    raise
                renamed.append(dest)
                with atomic_open(ann, "wb") as f:
                    f.write(doc_bytes)
            summ.images_dir, summ.ann_file = str(dest), str(ann)
