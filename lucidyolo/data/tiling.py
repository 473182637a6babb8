"""Cut DOTA-v1.0 scenes into training tiles (``lucid data tile dota``), torch-free.

DOTA scenes are aerial images of up to ~20000 px; a detector trains on fixed-size
crops of them. The tiler turns a DOTA root (``{split}/images`` +
``{split}/labelTxt``, or a flat ``images`` + ``labelTxt`` written as one split)
into a COCO container (``coco-split``: ``{split}/`` tiles +
``annotations/instances_{split}.json``) that the COCO reader trains on.

Algorithm, per scene:

1. **Windows.** Along each axis, windows of ``patch`` pixels start at
   ``0, stride, 2*stride, ...`` with ``stride = patch - overlap`` while the
   window still falls short of the far edge; one last window then sits flush
   with that edge, so every pixel is covered and no tile is padded. An axis
   shorter than the patch gets one window at 0 and the tile keeps the axis's
   true (smaller) size. Windows are ``(x0, y0, x1, y1)`` integer pixels, ``x1``
   exclusive, in row-major order (y, then x).
2. **Objects.** Each object's 4-corner ring is intersected with the window
   box (shapely). ``U = clipped area / original area``:

   * ``U == 0`` (no overlap, or only touching): not in this tile;
   * ``U >= 0.7``: kept with its original 4 corners, which may reach a little
     past the tile edge;
   * ``0 < U < 0.7``: kept, flagged ``difficult`` (most of the object is in
     another tile), and re-fitted: the clipped piece is replaced by the 4
     corners of its minimum-area rotated rectangle, those corners clamped to
     the window (the rectangle of a cut piece can poke past the cut line).

   An object already difficult in the label stays difficult. Original rings of
   zero area are dropped once per scene and counted.
3. **Output.** Tile ``{stem}__{x0}_{y0}.{suffix}`` and one COCO image entry
   (``source_image``, ``window``) per window; per kept object an annotation with
   the tile-local ring as ``segmentation``, ``bbox`` and ``area`` of that ring
   clipped to the tile, ``iscrowd`` 0 and ``difficult``. Coordinates are
   rounded to 2 decimals so the bytes are stable.

Ids are deterministic: scenes sorted by name, windows row-major, annotations
in that order. Scenes run in parallel in a spawn process pool
(``workers > 1``); each worker writes its scene's tiles and returns the
metadata, which is reassembled in scene order, so the output is byte-identical
to a serial run.

Nothing half-written looks complete: every split's tiles go to a staging
folder of this run, ``{out}/.{split}.partial-{host}-{pid}-{random}/``; only
after all splits succeeded is each folder renamed to ``{out}/{split}`` and
then its JSON written atomically (the JSON is what makes a split readable).
On any error the staging folders are removed; one left by a killed run (its
process is gone on this host) is removed by the next run on that ``out``.

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
import multiprocessing
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import shapely
from PIL import Image, UnidentifiedImageError

from lucidyolo.atomic_write import atomic_open
from lucidyolo.data.dota import DOTA_V1_CLASSES, parse_dota_label_file
from lucidyolo.data.image_io import (
    FLOAT_MODE,
    GRAY16_MODES,
    IMAGE_SUFFIXES,
    INT32_MODE,
    pil_to_rgb8,
)
from lucidyolo.errors import DataError

Window = tuple[int, int, int, int]

#: ``U`` below this keeps an object flagged difficult and re-fitted.
KEEP_AS_IS_U = 0.7
#: The largest DOTA-v1.0 scenes are ~20000 x 20000 px (4e8 pixels), above
#: PIL's decompression-bomb guard (~1.8e8); 1.5e9 still refuses absurd files.
MAX_SCENE_PIXELS = 1_500_000_000
#: zlib level 3: on a 1024 px DOTA tile ~3x faster than PIL's default 6 for
#: ~5% larger files; fixed, so PNG bytes are reproducible.
PNG_COMPRESS_LEVEL = 3
JPEG_QUALITY = 95
SUFFIXES = ("png", "jpg")


# --------------------------------------------------------------------------- windows


def window_starts(length: int, patch: int, stride: int) -> list[int]:
    """Start offsets of the windows along one axis of ``length`` pixels.

    ``0, stride, 2*stride, ...`` while ``start + patch < length``, then one
    window flush with the far edge (``length - patch``); ``[0]`` when the axis
    is not longer than the patch.
    """
    if length <= patch:
        return [0]
    starts = list(range(0, length - patch, stride))
    starts.append(length - patch)
    return starts


def check_patch_overlap(patch: int, overlap: int) -> None:
    """Raise :class:`DataError` unless ``patch > overlap >= 0``."""
    if patch <= 0:
        raise DataError(f"--patch {patch} must be a positive number of pixels.", fix="Use e.g. --patch 1024.")
    if overlap < 0 or overlap >= patch:
        raise DataError(
            f"--overlap {overlap} must be at least 0 and smaller than --patch {patch}.",
            why="windows advance by patch - overlap pixels, which must be positive.",
            fix="Use e.g. --patch 1024 --overlap 200.",
        )


def tile_windows(width: int, height: int, patch: int, overlap: int) -> list[Window]:
    """Windows ``(x0, y0, x1, y1)`` covering a ``width x height`` scene, row-major (y, then x).

    ``x1``/``y1`` are exclusive and never exceed the scene, so edge tiles of a
    scene smaller than ``patch`` keep the scene's size.

    Raises:
        DataError: ``overlap >= patch`` or a negative value.
    """
    check_patch_overlap(patch, overlap)
    stride = patch - overlap
    xs, ys = window_starts(width, patch, stride), window_starts(height, patch, stride)
    return [(x, y, min(x + patch, width), min(y + patch, height)) for y in ys for x in xs]


# --------------------------------------------------------------------------- objects


def object_polygons(corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shapely polygons of the rings and their areas.

    Args:
        corners: ``(N, 4, 2)`` pixels.

    Returns:
        ``polys (N,)`` shapely Polygons, ``areas (N,)`` float64. A ring whose
        corners are listed in crossing (bow-tie) order is replaced by its
        convex hull, the quadrilateral the annotator meant; GEOS cannot
        intersect a self-crossing ring.
    """
    c = np.asarray(corners, np.float64).reshape(-1, 4, 2)
    polys = shapely.polygons(c)
    if len(polys):
        bad = ~shapely.is_valid(polys)
        if bad.any():
            polys[bad] = shapely.convex_hull(polys[bad])
    return polys, shapely.area(polys).astype(np.float64)


@dataclass
class ClippedObjects:
    """Objects of one window, in label order.

    Attributes:
        index: ``(M,)`` int64 rows of the scene's objects.
        rings: ``(M, 4, 2)`` float64 scene pixels (original or re-fitted corners).
        cut: ``(M,)`` bool, ``U < 0.7`` (flagged difficult and re-fitted).
        u: ``(M,)`` float64 kept fraction of each object's area.
    """

    index: np.ndarray
    rings: np.ndarray
    cut: np.ndarray
    u: np.ndarray


def clip_objects(corners: np.ndarray, polys: np.ndarray, areas: np.ndarray, window: Window) -> ClippedObjects:
    """Apply the clipping rule of the module docstring to one window.

    Args:
        corners: ``(N, 4, 2)`` scene pixels.
        polys, areas: from :func:`object_polygons`; objects with ``area <= 0``
            must already be removed.
        window: ``(x0, y0, x1, y1)``.
    """
    x0, y0, x1, y1 = window
    c = np.asarray(corners, np.float64).reshape(-1, 4, 2)
    lo, hi = c.min(1), c.max(1)
    # Box test first: a big scene has thousands of objects and hundreds of
    # windows, and most pairs are far apart. Strict inequalities: an object
    # that only touches the window has U == 0.
    near = (lo[:, 0] < x1) & (hi[:, 0] > x0) & (lo[:, 1] < y1) & (hi[:, 1] > y0)
    inside = near & (lo[:, 0] >= x0) & (hi[:, 0] <= x1) & (lo[:, 1] >= y0) & (hi[:, 1] <= y1)
    u = np.where(inside, 1.0, 0.0)
    part = np.flatnonzero(near & ~inside)
    pieces = np.empty(0, dtype=object)
    if len(part):
        pieces = shapely.intersection(polys[part], shapely.box(x0, y0, x1, y1))
        u[part] = shapely.area(pieces) / areas[part]
    keep = np.flatnonzero(u > 0)
    rings = c[keep].copy()
    cut = u[keep] < KEEP_AS_IS_U
    if cut.any():
        piece_of = dict(zip(part.tolist(), pieces, strict=True))
        bounds_lo, bounds_hi = np.array([x0, y0], np.float64), np.array([x1, y1], np.float64)
        for j in np.flatnonzero(cut):
            rect = shapely.minimum_rotated_rectangle(piece_of[int(keep[j])])
            xy = np.asarray(shapely.get_coordinates(rect), np.float64)
            if len(xy) < 4:  # a sliver GEOS collapses to a line: keep its clipped box instead
                bx0, by0, bx1, by1 = shapely.bounds(rect)
                xy = np.array([[bx0, by0], [bx1, by0], [bx1, by1], [bx0, by1]])
            rings[j] = np.clip(xy[:4], bounds_lo, bounds_hi)
    return ClippedObjects(index=keep.astype(np.int64), rings=rings, cut=cut, u=u[keep])


def tile_annotations(rings: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COCO ``bbox`` and ``area`` of tile-local rings clipped to the tile.

    Args:
        rings: ``(M, 4, 2)`` tile-local pixels (already rounded).
        width, height: the tile's size.

    Returns:
        ``bbox (M, 4)`` ``[x, y, w, h]``, ``area (M,)``, ``ok (M,)`` bool: the
        ring still has positive area inside the tile (a re-fitted sliver can
        collapse when clamped and rounded).
    """
    m = len(rings)
    if m == 0:
        return np.zeros((0, 4)), np.zeros(0), np.zeros(0, bool)
    polys, _ = object_polygons(rings)
    inter = shapely.intersection(polys, shapely.box(0, 0, width, height))
    b = shapely.bounds(inter)  # NaN for an empty intersection
    area = shapely.area(inter)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(b).all(1) & (area > 0) & (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
    bbox = np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)
    return np.where(ok[:, None], bbox, 0.0), np.where(ok, area, 0.0), ok


# --------------------------------------------------------------------------- scenes


@dataclass
class SceneJob:
    """One scene to tile (picklable: sent to a worker process).

    Attributes:
        image: scene image path.
        corners: ``(N, 4, 2)`` float32 pixels; ``labels (N,)`` 0-based DOTA-v1.0
            classes; ``difficult (N,)`` bool.
        has_label: a label file existed (else the scene is background).
        out_dir: the split's partial folder the tiles are written to.
    """

    image: Path
    corners: np.ndarray
    labels: np.ndarray
    difficult: np.ndarray
    has_label: bool
    out_dir: Path
    patch: int
    overlap: int
    suffix: str
    drop_empty: bool


@dataclass
class SceneResult:
    """What one scene produced; ids are assigned later, in scene order."""

    name: str
    images: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[list[dict[str, Any]]] = field(default_factory=list)  # per kept tile
    tiles: int = 0
    empty_tiles: int = 0
    empty_tiles_dropped: int = 0
    objects_in_labels: int = 0
    objects: int = 0
    difficult_by_clipping: int = 0
    dropped_degenerate: int = 0
    dropped_slivers: int = 0
    error: tuple[str, str | None, str | None] | None = None


def _r2(a: np.ndarray) -> list[float]:
    # round() of a Python float gives the shortest repr of the 2-decimal value; +0.0 folds -0.0.
    return [round(float(v), 2) + 0.0 for v in np.asarray(a).ravel()]


def open_scene(path: Path) -> Image.Image:
    """Decode a scene to an RGB PIL image (``(H, W, 3)`` once as an array).

    16-bit gray scenes are scaled to 8 bits as in
    :func:`~lucidyolo.data.image_io.read_image`.

    Raises:
        DataError: the file is missing, truncated or not an image, or holds
            float pixels (or 32-bit integers beyond 16 bits).
    """
    old = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = MAX_SCENE_PIXELS
    try:
        with Image.open(path) as im:
            im.load()
            if im.mode in GRAY16_MODES or im.mode in (INT32_MODE, FLOAT_MODE):
                # convert("RGB") clips 16-bit gray to white: scale as every reader does
                return Image.fromarray(pil_to_rgb8(im, path))
            return im.convert("RGB")
    except FileNotFoundError:
        raise DataError(f"Scene image {path} does not exist.", fix="Check the --data-root path.") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise DataError(
            f"Scene image {path} cannot be decoded ({exc}).",
            why="the file is truncated, corrupt or not an image.",
            fix="Replace the file (re-download the scene) or remove it and its label file.",
        ) from None
    finally:
        Image.MAX_IMAGE_PIXELS = old


def _save_tile(img: Image.Image, path: Path, suffix: str) -> None:
    if suffix == "png":
        img.save(path, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    else:
        img.save(path, format="JPEG", quality=JPEG_QUALITY)


def tile_scene(job: SceneJob) -> SceneResult:
    """Write one scene's tiles into ``job.out_dir`` and return their COCO entries (without ids)."""
    res = SceneResult(name=job.image.name, objects_in_labels=len(job.labels))
    img = open_scene(job.image)
    width, height = img.size
    polys, areas = object_polygons(job.corners)
    valid = areas > 0
    res.dropped_degenerate = int((~valid).sum())
    corners = np.asarray(job.corners, np.float64)[valid]
    labels, difficult, polys, areas = job.labels[valid], job.difficult[valid], polys[valid], areas[valid]
    for window in tile_windows(width, height, job.patch, job.overlap):
        x0, y0, x1, y1 = window
        tw, th = x1 - x0, y1 - y0
        clipped = clip_objects(corners, polys, areas, window)
        local = np.round(clipped.rings - np.array([x0, y0], np.float64), 2)
        bbox, area, ok = tile_annotations(local, tw, th)
        res.dropped_slivers += int((~ok).sum())
        anns = []
        for j in np.flatnonzero(ok):
            i = int(clipped.index[j])
            anns.append(
                {
                    "category_id": int(labels[i]) + 1,
                    "segmentation": [_r2(local[j])],
                    "bbox": _r2(bbox[j]),
                    "area": _r2(area[j : j + 1])[0],
                    "iscrowd": 0,
                    "difficult": int(bool(difficult[i]) or bool(clipped.cut[j])),
                }
            )
            res.difficult_by_clipping += int(clipped.cut[j] and not difficult[i])
        if not anns and job.drop_empty:
            res.empty_tiles_dropped += 1
            continue
        name = f"{job.image.stem}__{x0}_{y0}.{job.suffix}"
        _save_tile(img.crop(window), job.out_dir / name, job.suffix)
        res.images.append(
            {"file_name": name, "width": tw, "height": th, "source_image": job.image.name, "window": [x0, y0, x1, y1]}
        )
        res.annotations.append(anns)
        res.tiles += 1
        res.empty_tiles += int(not anns)
        res.objects += len(anns)
    return res


def _tile_scene_worker(job: SceneJob) -> SceneResult:
    # A DataError pickles as its flattened message only; carry its parts instead.
    try:
        return tile_scene(job)
    except DataError as err:
        return SceneResult(name=job.image.name, error=(err.what, err.why, err.fix))


# --------------------------------------------------------------------------- roots


@dataclass
class SplitInput:
    """One split of the input root: its scenes (sorted by file name) and their label files."""

    split: str
    images_dir: Path
    labels_dir: Path
    images: list[Path]
    labels: list[Path | None]


def find_splits(root: Path, splits: Sequence[str]) -> list[SplitInput]:
    """Resolve the input root to its scenes, per split.

    ``root/{split}/images`` + ``root/{split}/labelTxt`` per split, or a flat
    ``root/images`` + ``root/labelTxt`` when exactly one split is asked for.

    Raises:
        DataError: the root or a split folder is missing, a flat root with
            several splits, a label file without its image, two scenes with
            one stem, a folder without images.
    """
    if not splits:
        raise DataError("No split given.", fix="Pass e.g. --splits train,val (or --splits train for a flat root).")
    if len(set(splits)) != len(splits):
        raise DataError(f"--splits {','.join(splits)} names a split twice.", fix="Name each split once.")
    for s in splits:
        if not s or s.startswith(".") or "/" in s or "\\" in s or s == "annotations":
            raise DataError(f"Split name {s!r} cannot be used as a folder name.", fix="Use names such as train, val.")
    if not root.is_dir():
        raise DataError(f"DOTA root {root} does not exist or is not a folder.", fix="Check the --data-root path.")
    flat = (root / "images").is_dir() and (root / "labelTxt").is_dir()
    nested = any((root / s / "images").is_dir() for s in splits)
    if flat and not nested:
        if len(splits) != 1:
            raise DataError(
                f"{root} is a flat DOTA folder (images/ + labelTxt/, no split folders), but --splits names {len(splits)} splits ({', '.join(splits)}).",
                why="a flat folder holds one set of scenes; it cannot be divided into several splits.",
                fix=f"Pass one split, e.g. --splits {splits[0]}; tile another flat folder into the same --out with the other split name.",
            )
        dirs = [(splits[0], root / "images", root / "labelTxt")]
    else:
        dirs = []
        for s in splits:
            img_dir, lab_dir = root / s / "images", root / s / "labelTxt"
            if not img_dir.is_dir() or not lab_dir.is_dir():
                missing = img_dir if not img_dir.is_dir() else lab_dir
                raise DataError(
                    f"Split {s!r}: {missing} is missing.",
                    why=f"looked for {root / s / 'images'}/ + {root / s / 'labelTxt'}/ (or a flat {root / 'images'}/ + {root / 'labelTxt'}/ with one split).",
                    fix="Check --data-root and --splits; an unlabelled split needs an empty labelTxt/ folder.",
                )
            dirs.append((s, img_dir, lab_dir))
    out = []
    for s, img_dir, lab_dir in dirs:
        images = sorted((p for p in img_dir.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES), key=lambda p: p.name)
        if not images:
            raise DataError(f"{img_dir} contains no images.", fix=f"Put the scene images there ({', '.join(IMAGE_SUFFIXES)}).")
        by_stem: dict[str, Path] = {}
        for p in images:
            if p.stem in by_stem:
                raise DataError(
                    f"{img_dir} holds two scenes named {p.stem!r}: {by_stem[p.stem].name} and {p.name}.",
                    why="tiles are named after the scene stem, and the label file is matched by it.",
                    fix="Remove or rename one of them.",
                )
            by_stem[p.stem] = p
        for lab in sorted(lab_dir.glob("*.txt")):
            if lab.stem not in by_stem:
                raise DataError(
                    f"{lab}: label file has no image {img_dir / lab.stem}.*",
                    why="a label for a missing scene cannot be tiled.",
                    fix="Restore the image or delete the label file.",
                )
        labels = [lab_dir / f"{p.stem}.txt" for p in images]
        out.append(SplitInput(s, img_dir, lab_dir, images, [lab if lab.is_file() else None for lab in labels]))
    return out


# --------------------------------------------------------------------------- driver


@dataclass
class SplitSummary:
    """Counts of one tiled split."""

    split: str
    scenes: int = 0
    scenes_without_labels: int = 0
    tiles: int = 0
    empty_tiles: int = 0
    empty_tiles_dropped: int = 0
    objects_in_labels: int = 0
    objects: int = 0
    difficult_by_clipping: int = 0
    dropped_degenerate: int = 0
    dropped_slivers: int = 0
    images_dir: str = ""
    ann_file: str = ""
    kept_identical: bool = False
    """Another run on the same ``out`` wrote this split first, byte-identical; its files were kept."""


@dataclass
class TileSummary:
    """Totals over all splits (the CLI's summary line / ``--json``)."""

    out: str
    splits: list[SplitSummary]
    seconds: float = 0.0
    workers: int = 0

    def total(self, key: str) -> int:
        return sum(getattr(s, key) for s in self.splits)

    def to_dict(self) -> dict[str, Any]:
        keys = ("scenes", "scenes_without_labels", "tiles", "empty_tiles", "empty_tiles_dropped", "objects_in_labels",
                "objects", "difficult_by_clipping", "dropped_degenerate", "dropped_slivers")  # fmt: skip
        return {
            "out": self.out,
            **{k: self.total(k) for k in keys},
            "seconds": round(self.seconds, 3),
            "workers": self.workers,
            "splits": [asdict(s) for s in self.splits],
        }


def coco_categories() -> list[dict[str, Any]]:
    """The 15 DOTA-v1.0 categories, ids 1..15 in the official order."""
    return [{"id": i + 1, "name": n} for i, n in enumerate(DOTA_V1_CLASSES)]


def _parse_labels(si: SplitInput) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    empty = (np.zeros((0, 4, 2), np.float32), np.zeros(0, np.int64), np.zeros(0, bool))
    return [parse_dota_label_file(lab) if lab is not None else empty for lab in si.labels]


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


def _commit(out: Path, inputs: list[SplitInput], partials: list[Path], docs: list[dict[str, Any]],
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


def tile_dota(
    root: Path,
    out: Path,
    splits: Sequence[str] = ("train", "val"),
    *,
    patch: int = 1024,
    overlap: int = 200,
    workers: int = 0,
    suffix: str = "png",
    drop_empty_tiles: bool = False,
    on_scene: Callable[[str, SceneResult], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> TileSummary:
    """Tile a DOTA root into the COCO container ``out`` (see the module docstring).

    Args:
        root: DOTA root (split folders or one flat folder).
        out: output root; may exist, but none of the splits may exist in it.
        splits: split names to tile.
        patch, overlap: window size and overlap in pixels (``0 <= overlap < patch``).
        workers: ``0``/``1`` serial, ``K > 1`` a spawn process pool of ``K``.
        suffix: ``png`` (lossless) or ``jpg`` (quality 95).
        drop_empty_tiles: skip tiles without objects.
        on_scene: called in scene order as each scene is done ``(split, result)``.
        on_start: called once with the number of scenes, before tiling.

    Raises:
        DataError: bad arguments, a missing/malformed input (``file:line``), a
            corrupt scene, or a split that already exists under ``out``.
    """
    t0 = time.perf_counter()
    suffix = suffix.lower().lstrip(".")
    if suffix == "jpeg":
        suffix = "jpg"
    if suffix not in SUFFIXES:
        raise DataError(f"--suffix {suffix!r} is not supported.", fix="Use --suffix png (lossless) or --suffix jpg (quality 95).")
    check_patch_overlap(patch, overlap)
    if workers < 0:
        raise DataError(f"--workers {workers} must be 0 or more.", fix="Use 0 (serial) or the number of processes.")
    inputs = find_splits(Path(root), list(splits))
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out} exists and is not a folder.", fix="Pick another --out.")
    for si in inputs:
        for p in (out / si.split, out / "annotations" / f"instances_{si.split}.json"):
            if p.exists():
                raise DataError(
                    f"Split {si.split!r} already exists in {out}: {p}.",
                    why="tiling never overwrites a split (it may hold another root's tiles).",
                    fix=f"Remove {out / si.split} and {out / 'annotations' / f'instances_{si.split}.json'}, or pick another --out.",
                )
    # Labels are small: parse them all before writing a tile, so a bad row fails fast.
    parsed = [_parse_labels(si) for si in inputs]
    jobs: list[tuple[int, SceneJob]] = []
    partials: list[Path] = []
    summaries = [SplitSummary(si.split) for si in inputs]
    docs = [{"images": [], "annotations": [], "categories": coco_categories()} for _ in inputs]
    renamed: list[Path] = []
    results = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        for si in inputs:
            remove_dead_staging(out, si.split)
            # unique per run: two runs on one --out never write into each other's folder
            partials.append(Path(tempfile.mkdtemp(dir=out, prefix=f"{_staging_prefix(si.split)}{_host()}-{os.getpid()}-")))
        for k, si in enumerate(inputs):
            for img, lab, (corners, labels, difficult) in zip(si.images, si.labels, parsed[k], strict=True):
                jobs.append((k, SceneJob(img, corners, labels, difficult, lab is not None, partials[k], patch, overlap, suffix, drop_empty_tiles)))
        del parsed
        if on_start is not None:
            on_start(len(jobs))
        results = _run_jobs([j for _, j in jobs], workers)
        for (k, job), res in zip(jobs, results, strict=True):
            if res.error is not None:
                raise DataError(*res.error)
            _collect(summaries[k], docs[k], res, job.has_label)
            if on_scene is not None:
                on_scene(inputs[k].split, res)
        _commit(out, inputs, partials, docs, summaries, renamed)
    except BaseException:
        if results is not None:
            results.close()  # cancel queued scenes and wait for running ones before deleting their folder
        for p in partials:
            _remove(p)
        # A renamed split whose JSON did not get written is incomplete too.
        for d in renamed:
            if not (out / "annotations" / f"instances_{d.name}.json").exists():
                _remove(d)
        raise
    return TileSummary(out=str(out), splits=summaries, seconds=time.perf_counter() - t0, workers=workers)


def _run_jobs(jobs: list[SceneJob], workers: int):
    """Yield each job's result in job order (serial or from a spawn process pool)."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield _tile_scene_worker(job)
        return
    # spawn: no fork of a parent holding threads (rich, BLAS) or big arrays;
    # workers import only this module's numpy/shapely/PIL.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        futures = [pool.submit(_tile_scene_worker, job) for job in jobs]
        try:
            for fut in futures:
                yield fut.result()
        except BaseException:  # GeneratorExit included: the caller stopped on an error
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _collect(summ: SplitSummary, doc: dict[str, Any], res: SceneResult, has_label: bool) -> None:
    """Append one scene's entries to its split's COCO document, assigning the next ids."""
    summ.scenes += 1
    summ.scenes_without_labels += int(not has_label)
    for key in ("tiles", "empty_tiles", "empty_tiles_dropped", "objects_in_labels", "objects", "difficult_by_clipping",
                "dropped_degenerate", "dropped_slivers"):  # fmt: skip
        setattr(summ, key, getattr(summ, key) + getattr(res, key))
    images, annotations = doc["images"], doc["annotations"]
    for entry, anns in zip(res.images, res.annotations, strict=True):
        image_id = len(images) + 1
        images.append({"id": image_id, **entry})
        for a in anns:
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, **a})
