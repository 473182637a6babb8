"""Resolve ``--source`` (an image, a video, a folder or a glob) into image and video files."""

from __future__ import annotations

import glob
from pathlib import Path

from lucidyolo.data.image_io import IMAGE_SUFFIXES
from lucidyolo.errors import UserError
from lucidyolo.predict.video import VIDEO_SUFFIXES

SOURCE_SUFFIXES = IMAGE_SUFFIXES + VIDEO_SUFFIXES


def is_video(path: Path) -> bool:
    """True when ``path`` has a video suffix (:data:`~lucidyolo.predict.video.VIDEO_SUFFIXES`)."""
    return path.suffix.lower() in VIDEO_SUFFIXES


def resolve_sources(source: str) -> list[Path]:
    """Image and video files named by ``source``, sorted (a folder is not searched recursively).

    Raises:
        UserError: nothing matches, or a named file is neither an image nor a video type.
    """
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in SOURCE_SUFFIXES)
    elif path.is_file():
        if path.suffix.lower() not in SOURCE_SUFFIXES:
            raise UserError(
                f"--source {source} is neither an image nor a video file (suffix {path.suffix or 'none'}).",
                fix=f"Use an image ({', '.join(IMAGE_SUFFIXES)}), a video ({', '.join(VIDEO_SUFFIXES)}), "
                "a folder of them or a glob.",
            )
        files = [path]
    else:
        files = sorted(
            Path(p)
            for p in glob.glob(source, recursive=True)
            if Path(p).suffix.lower() in SOURCE_SUFFIXES
        )
    if not files:
        raise UserError(
            f"--source {source} matches no image or video.",
            fix="Give an image or video file, a folder of them or a quoted glob.",
        )
    return files
