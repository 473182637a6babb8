"""Cut DOTA-v1.0 scenes into training tiles (``lucid data tile dota``), torch-free.

DOTA scenes are aerial images of up to ~20000 px; a detector trains on fixed-size
crops of them. The tiler turns a DOTA root (``{split}/images`` +
``{split}/labelTxt``, or a flat ``images`` + ``labelTxt`` written as one split)
into a COCO container (``coco-split``: ``{split}/`` tiles +
``annotations/instances_{split}.json``) that the COCO reader trains on.

Algorithm, per scene (each step's rule is written out in its module):

1. **Windows** (:mod:`~lucidyolo.data.dota.windows`): windows of ``patch``
   pixels advance by ``patch - overlap``, the last one flush with the far
   edge, so every pixel is covered and no tile is padded.
2. **Objects** (:mod:`~lucidyolo.data.dota.clip`): each object is kept in a
   tile by the share ``U`` of its area inside the window: as is when
   ``U >= 0.7``, flagged difficult and re-fitted when ``0 < U < 0.7``.
3. **Output** (:mod:`~lucidyolo.data.dota.scene`): one tile image and one
   COCO image entry per window, one annotation per kept object.

Ids are deterministic: scenes sorted by name, windows row-major, annotations
in that order. Scenes run in parallel in a spawn process pool
(``workers > 1``); each worker writes its scene's tiles and returns the
metadata, which is reassembled in scene order, so the output is byte-identical
to a serial run.

Nothing half-written looks complete, and two runs on one ``out`` never mix
their splits: see :mod:`~lucidyolo.data.dota.staging`. The input root is
resolved by :mod:`~lucidyolo.data.dota.splits`, the counts are
:mod:`~lucidyolo.data.dota.summary`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.data.dota import staging
from lucidyolo.data.dota.reader import DOTA_V1_CLASSES, parse_dota_label_file
from lucidyolo.data.dota.scene import SUFFIXES, SceneJob, SceneResult, tile_scenes
from lucidyolo.data.dota.splits import SplitInput, find_splits
from lucidyolo.data.dota.summary import SplitSummary, TileSummary
from lucidyolo.data.dota.windows import check_patch_overlap
from lucidyolo.errors import DataError


def coco_categories() -> list[dict[str, Any]]:
    """The 15 DOTA-v1.0 categories, ids 1..15 in the official order."""
    return [{"id": i + 1, "name": n} for i, n in enumerate(DOTA_V1_CLASSES)]


def _parse_labels(si: SplitInput) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    empty = (np.zeros((0, 4, 2), np.float32), np.zeros(0, np.int64), np.zeros(0, bool))
    return [parse_dota_label_file(lab) if lab is not None else empty for lab in si.labels]


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
            partials.append(staging.new_staging(out, si.split))
        for k, si in enumerate(inputs):
            for img, lab, (corners, labels, difficult) in zip(si.images, si.labels, parsed[k], strict=True):
                jobs.append((k, SceneJob(img, corners, labels, difficult, lab is not None, partials[k], patch, overlap, suffix, drop_empty_tiles)))
        del parsed
        if on_start is not None:
            on_start(len(jobs))
        results = tile_scenes([j for _, j in jobs], workers)
        for (k, job), res in zip(jobs, results, strict=True):
            if res.error is not None:
                raise DataError(*res.error)
            _collect(summaries[k], docs[k], res, job.has_label)
            if on_scene is not None:
                on_scene(inputs[k].split, res)
        staging.commit(out, inputs, partials, docs, summaries, renamed)
    except BaseException:
        if results is not None:
            results.close()  # cancel queued scenes and wait for running ones before deleting their folder
        staging.discard(out, partials, renamed)
        raise
    return TileSummary(out=str(out), splits=summaries, seconds=time.perf_counter() - t0, workers=workers)


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
