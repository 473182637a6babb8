"""One scene to tiles: decode it, write its tiles, return their COCO entries (in a worker or in-process).

Per window: tile ``{stem}__{x0}_{y0}.{suffix}`` and one COCO image entry
(``source_image``, ``window``); per kept object an annotation with the
tile-local ring as ``segmentation``, ``bbox`` and ``area`` of that ring
clipped to the tile, ``iscrowd`` 0 and ``difficult``. Coordinates are
rounded to 2 decimals so the bytes are stable.

Scenes run in parallel in a spawn process pool (``workers > 1``); each worker
writes its scene's tiles and returns the metadata, without ids: the tiler
assigns them in scene order (:mod:`lucidyolo.data.dota.tiler`).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from lucidyolo.data.dota.clip import clip_objects, object_polygons, tile_annotations
from lucidyolo.data.dota.windows import tile_windows
from lucidyolo.data.image_io import (
    FLOAT_MODE,
    GRAY16_MODES,
    INT32_MODE,
    pil_to_rgb8,
)
from lucidyolo.errors import DataError

#: The largest DOTA-v1.0 scenes are ~20000 x 20000 px (4e8 pixels), above
#: PIL's decompression-bomb guard (~1.8e8); 1.5e9 still refuses absurd files.
MAX_SCENE_PIXELS = 1_500_000_000
#: zlib level 3: on a 1024 px DOTA tile ~3x faster than PIL's default 6 for
#: ~5% larger files; fixed, so PNG bytes are reproducible.
PNG_COMPRESS_LEVEL = 3
JPEG_QUALITY = 95
SUFFIXES = ("png", "jpg")


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


def tile_scenes(jobs: list[SceneJob], workers: int):
    """Yield each job's result in job order (serial or from a spawn process pool)."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            yield _tile_scene_worker(job)
        return
    # spawn: no fork of a parent holding threads (rich, BLAS) or big arrays;
    # workers import only this module (numpy, shapely, PIL), not the tiler or the reader.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        futures = [pool.submit(_tile_scene_worker, job) for job in jobs]
        try:
            for fut in futures:
                yield fut.result()
        except BaseException:  # GeneratorExit included: the caller stopped on an error
            pool.shutdown(wait=True, cancel_futures=True)
            raise
