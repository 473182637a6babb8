"""The label index: a scanned split kept on disk, so the next start stats its files instead of reading them.

A split of per-image files (YOLO: an image and its label text file) is
scanned once: every image header is read for its size and every label file
parsed into targets, on every core (:data:`PARALLEL_MIN` files and more;
:mod:`~lucidyolo.data.core_shares`).
What the scan found (the packed :class:`ImageSource`, the bad images and their
reasons) is written, atomically, to one ``.npz`` file per dataset, split and
task fields, keyed by every file's ``(size, mtime_ns)`` (an image's and its
label's; a missing label is ``-1``). The next scan of that split lists and
stats the files, re-reads only those whose key changed (an edited label file,
a replaced image, a new file) and splices them into the indexed rest; a
removed file simply leaves. An index written by another lucid version, for
another yaml content, other fields or another pixel limit is not used: the
split is scanned again and the index replaced. So is a corrupt one, with a
warning naming it.

Where: ``$LUCIDYOLO_INDEX_DIR``, else ``label-index/`` in lucid's user cache
(:func:`~lucidyolo.data.user_cache.cache_dir`). ``LUCIDYOLO_LABEL_INDEX=off``
neither reads nor writes it. Numpy only (no pickle), torch-free.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.data.core_shares import map_shares
from lucidyolo.data.source import ImageSource, SourceBuilder
from lucidyolo.data.user_cache import cache_dir
from lucidyolo.errors import DataError
from lucidyolo.structures.targets import Targets

INDEX_ENV = "LUCIDYOLO_LABEL_INDEX"
"""``off`` turns the index off (every start scans every file)."""

INDEX_DIR_ENV = "LUCIDYOLO_INDEX_DIR"
"""Where the index files live, in place of the user cache."""

FORMAT = 1
"""Bump when what an index file holds changes: older files are then rebuilt."""

PARALLEL_MIN = 2000
"""Files a scan reads on one core; from this many on, every core reads a share (a pool costs ~0.1 s to start)."""

STAT_SHARES_FROM = 20_000
"""Files from which their stats are taken on every core (a stat costs ~2 us; the pool ~0.05 s)."""

MISSING = -1
"""The size and mtime of a label file that does not exist."""

RACY_NS = 2_000_000_000
"""A file changed this close to the scan (2 s) is indexed as unknown, so the next scan reads it again.

File times come from a coarse clock (a few ms on Linux, 2 s on FAT): a label
rewritten within one tick with the same size keeps its key. Git's index has
the same "racily clean" rule.
"""

UNKNOWN = -2
"""The key an index stores for a racy file: no real key equals it."""


@dataclass(frozen=True)
class SplitReader:
    """How one file pair of a split is read, and what the packed split is called.

    Attributes:
        fields, meta: the task's fields and the dataset meta their rules read.
        image_size: ``(path) -> (h, w)`` from the header; a
            :class:`~lucidyolo.errors.DataError` makes the image a bad one.
        targets: ``(label path, (h, w)) -> Targets`` in pixels; a
            :class:`~lucidyolo.errors.DataError` (a malformed row) stops the scan.
        bad_reason: ``(error, image path) -> reason`` of a bad image.
        source_args: the :class:`ImageSource` constructor's other arguments
            (``root``, ``class_names``, ``category_ids``, ``name``, ``layout``).
        key: what else the scan's result depends on (the yaml's bytes, the pixel
            limit ...): an index written under another key is not used.
    """

    fields: tuple[str, ...]
    meta: dict[str, Any]
    image_size: Callable[[str], tuple[int, int]]
    targets: Callable[[str, tuple[int, int]], Targets]
    bad_reason: Callable[[DataError, Path], str]
    source_args: dict[str, Any]
    key: str


@dataclass
class Scan:
    """What a scan of a split found.

    Attributes:
        source: the readable images in listing order; image ids are listing positions.
        bad: ``(path, reason)`` of every image whose header could not be read.
        label_missing: ``(N_listed,)`` bool, the image's label file does not exist.
        read: how many files were read (not taken from the index): 0 on a full hit.
    """

    source: ImageSource
    bad: list[tuple[Path, str]]
    label_missing: np.ndarray
    read: int


def index_folder() -> Path | None:
    """The folder of the index files, or ``None`` when the index is off (``LUCIDYOLO_LABEL_INDEX=off``)."""
    if os.environ.get(INDEX_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return None
    own = os.environ.get(INDEX_DIR_ENV)
    return Path(own) if own else cache_dir() / "label-index"


def index_path(folder: Path, dataset: Path, split: str, fields: Sequence[str]) -> Path:
    """The index file of one split of ``dataset`` (its real path) read for ``fields``."""
    name = json.dumps([os.path.realpath(dataset), split, list(fields)])
    return folder / f"{hashlib.sha256(name.encode()).hexdigest()[:24]}.npz"


def file_keys(images: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """``(N, 4)`` int64: each image's size and mtime_ns, then its label's (:data:`MISSING` when absent)."""
    out = np.full((len(images), 4), MISSING, np.int64)
    for i, (img, lbl) in enumerate(zip(images, labels, strict=True)):
        try:
            st = os.stat(img)
            out[i, 0], out[i, 1] = st.st_size, st.st_mtime_ns
        except OSError:
            pass  # reading it names the problem
        try:
            st = os.stat(lbl)
            out[i, 2], out[i, 3] = st.st_size, st.st_mtime_ns
        except OSError:
            pass
    return out


# ----------------------------------------------------------------- reading files
def _read_share(reader: SplitReader, images: list[str], labels: list[str], rels: list[str], positions: Sequence[int],
                start: int, stop: int) -> tuple[str, Any]:
    """Read pairs ``start..stop-1`` into packed arrays.

    Returns ``("ok", (arrays, bad))`` with ``bad`` as ``(position, reason)``,
    or ``("error", (what, why, fix))`` for the first malformed label file.
    """
    builder = SourceBuilder(reader.fields, meta=reader.meta)
    bad: list[tuple[int, str]] = []
    for k in range(start, stop):
        try:
            hw = reader.image_size(images[k])
        except DataError as exc:
            bad.append((positions[k], reader.bad_reason(exc, Path(images[k]))))
            continue
        try:
            targets = reader.targets(labels[k], hw)
        except DataError as exc:
            return "error", (exc.what, exc.why, exc.fix)
        builder.add(rels[k], positions[k], hw, targets)
    return "ok", (builder.build(**reader.source_args).to_arrays(), bad)


def read_files(reader: SplitReader, images: list[str], labels: list[str], rels: list[str],
               positions: Sequence[int]) -> tuple[ImageSource, list[tuple[int, str]]]:
    """Read every listed pair (on every core from :data:`PARALLEL_MIN` pairs on).

    Returns the packed readable images (ids: ``positions``) and ``(position, reason)``
    of the bad ones, exactly as one process reading them in order would.

    Raises:
        DataError: the first malformed label file in listing order.
    """
    results = map_shares(lambda a, b: _read_share(reader, images, labels, rels, positions, a, b), len(images),
                         PARALLEL_MIN)
    parts, bad = [], []
    for status, payload in results:
        if status == "error":
            what, why, fix = payload
            raise DataError(what, why=why, fix=fix)
        arrays, share_bad = payload
        parts.append(ImageSource.from_arrays(arrays, fields=reader.fields, meta=reader.meta, **reader.source_args))
        bad.extend(share_bad)
    return (parts[0] if len(parts) == 1 else ImageSource.concat(parts)), bad


# ----------------------------------------------------------------- the index file
def _load(path: Path, reader: SplitReader) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The header and arrays of the index at ``path``; ``None`` when absent or written under another key."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        header = json.loads(arrays.pop("header").tobytes().decode("utf-8"))
        if header.get("format") != FORMAT or header.get("key") != reader.key:
            return None
        for name in ("paths", "keys"):
            if name not in arrays:
                raise ValueError(f"no {name!r} array")
        return header, arrays
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        warnings.warn(f"The label index {path} cannot be read ({exc}); the split is scanned again and the index "
                      "rewritten.", UserWarning, stacklevel=4)
        return None


def _save(path: Path, reader: SplitReader, paths: np.ndarray, keys: np.ndarray, scan: Scan, started: int) -> None:
    keys = keys.copy()
    keys[np.maximum(keys[:, 1], keys[:, 3]) >= started - RACY_NS] = UNKNOWN
    header = {"format": FORMAT, "key": reader.key,
              "bad": [[str(p), reason] for p, reason in scan.bad]}
    arrays = {f"s.{k}": v for k, v in scan.source.to_arrays().items()}
    arrays.update(paths=paths, keys=keys, header=np.frombuffer(json.dumps(header).encode("utf-8"), np.uint8))
    try:
        with atomic_open(path, "wb") as f:
            np.savez(f, **arrays)
    except OSError as exc:
        warnings.warn(f"The label index {path} cannot be written ({exc.strerror or exc}); the next start scans "
                      f"every file again. Free the space, or set {INDEX_DIR_ENV} to a writable folder.",
                      UserWarning, stacklevel=4)


def scan_split(reader: SplitReader, images: list[str], labels: list[str], rels: list[str],
               index: Path | None) -> Scan:
    """Scan the listed image and label files of a split, through the index at ``index`` (``None``: no index).

    Args:
        images, labels, rels: each image's path, its label file's path and the
            image's path relative to the dataset root, in listing order.

    Raises:
        DataError: a malformed label file (nothing is written then).
    """
    started = time.time_ns()
    keys = np.concatenate([np.zeros((0, 4), np.int64), *map_shares(
        lambda a, b: file_keys(images[a:b], labels[a:b]), len(images), STAT_SHARES_FROM)])
    paths = np.array([p.encode("utf-8") for p in images], dtype=np.bytes_) if images else np.zeros(0, "S1")
    loaded = _load(index, reader) if index is not None else None
    kept_pos = np.zeros(0, np.int64)  # listing positions taken from the index ...
    kept_from = np.zeros(0, np.int64)  # ... and their image in the index's source
    bad: dict[int, str] = {}
    old: ImageSource | None = None
    if loaded is not None:
        header, arrays = loaded
        old = ImageSource.from_arrays({k[2:]: v for k, v in arrays.items() if k.startswith("s.")},
                                      fields=reader.fields, meta=reader.meta, **reader.source_args)
        if arrays["paths"].shape == paths.shape and np.array_equal(arrays["paths"], paths):
            where = np.arange(len(paths), dtype=np.int64)  # the same listing (the usual start)
        else:
            old_pos = {p: i for i, p in enumerate(arrays["paths"].tolist())}
            where = np.array([old_pos.get(p, -1) for p in paths.tolist()], np.int64)
        same = where >= 0
        same[same] = (arrays["keys"][where[same]] == keys[same]).all(1)
        # an image the index holds: its row in the old source (ids there are old listing positions)
        row_of = np.full(len(arrays["paths"]), -1, np.int64)
        row_of[old.all_image_ids()] = np.arange(len(old))
        indexed = row_of[np.maximum(where, 0)] >= 0
        old_bad = {str(p): reason for p, reason in header["bad"]}
        for i in np.flatnonzero(same & ~indexed).tolist():  # unchanged files that were bad: their reasons
            bad[i] = old_bad.get(images[i], "cannot be read")
        good = same & indexed
        kept_pos, kept_from = np.flatnonzero(good), row_of[where[good]]
        unread = ~same
    else:
        unread = np.ones(len(images), bool)
    todo = np.flatnonzero(unread)
    fresh, fresh_bad = read_files(reader, [images[i] for i in todo], [labels[i] for i in todo],
                                  [rels[i] for i in todo], todo.tolist())
    bad.update(dict(fresh_bad))
    if old is not None and not len(todo) and np.array_equal(old.all_image_ids(), kept_pos):
        source = old  # nothing changed: the index's split as it is
    elif old is not None and len(kept_pos):
        both = ImageSource.concat([old.take(kept_from, image_ids=kept_pos), fresh])
        ids = both.all_image_ids()
        source = both.take(np.argsort(ids, kind="stable"))
    else:
        source = fresh
    scan = Scan(source, [(Path(images[i]), bad[i]) for i in sorted(bad)], keys[:, 2] == MISSING, len(todo))
    hit = loaded is not None and not scan.read and len(loaded[1]["paths"]) == len(images)
    if index is not None and not hit:
        _save(index, reader, paths, keys, scan, started)
        _forget_unused(index.parent)
    elif index is not None:
        with contextlib.suppress(OSError):
            os.utime(index)  # used: kept by _forget_unused
    return scan


UNUSED_DAYS = 90
"""An index no start has used for this long is removed (its dataset moved, or is gone)."""


def _forget_unused(folder: Path) -> None:
    cutoff = time.time() - UNUSED_DAYS * 86400
    with contextlib.suppress(OSError):
        for old in folder.glob("*.npz"):
            with contextlib.suppress(OSError):
                if old.stat().st_mtime < cutoff:
                    old.unlink()
