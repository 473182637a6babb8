"""What ``lucid predict`` feeds the model: every image and every video frame of a source, in batches.

A video is decoded frame by frame as the batches are drawn, so it never sits in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np


@dataclass
class Item:
    """One picture to predict: an image file, or a frame of a video (``frame`` its 0-based index)."""

    source: Path
    image: np.ndarray
    frame: int | None = None
    time: float | None = None
    fps: Fraction | None = None

    @property
    def name(self) -> str:
        """How the item is named in printed lines: the file, and ``#frame=N`` for a video frame."""
        return str(self.source) if self.frame is None else f"{self.source}#frame={self.frame}"


def image_ids(files: Sequence[Path]) -> dict[Path, int] | None:
    """COCO ``image_id`` per image file when every stem is a distinct number (COCO's own file names,
    ``000000000139.jpg`` -> 139); ``None`` otherwise (ids then count 1, 2, ... in processing order)."""
    from lucidyolo.predict.sources import is_video

    if any(is_video(f) for f in files) or not all(f.stem.isdigit() for f in files):
        return None
    ids = {f: int(f.stem) for f in files}
    return ids if len(set(ids.values())) == len(ids) else None


def source_items(files: Sequence[Path], on_warning: Callable[[str], None] | None = None) -> Iterator[Item]:
    """Every image, and every frame of every video, in order; a video is read frame by frame.

    A video frame's ``frame`` is its index in the source (a frame lost to a damaged packet leaves a
    gap); ``on_warning`` gets one line per video that had damage (default: :func:`warnings.warn`).
    """
    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.predict.sources import is_video
    from lucidyolo.predict.video import VideoReader

    for f in files:
        if not is_video(f):
            yield Item(f, read_image_fast(f))  # libjpeg-turbo for JPEG, as validation decodes
            continue
        with VideoReader(f) as video:
            for i, frame in video.frames_at():
                yield Item(f, frame, i, round(float(i / video.fps), 6), video.fps)
            damage = video.damage()
        if damage is not None:
            if on_warning is None:
                import warnings

                warnings.warn(damage, stacklevel=2)
            else:
                on_warning(damage)


def batches(items: Iterator[Item], size: int) -> Iterator[list[Item]]:
    """``items`` in lists of ``size`` (the last one shorter); a batch may span files."""
    batch: list[Item] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
