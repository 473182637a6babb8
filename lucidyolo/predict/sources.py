"""Resolve ``--source`` (an image, a folder or a glob) into image files."""

from __future__ import annotations

import glob
from pathlib import Path

from lucidyolo.data.image_io import IMAGE_SUFFIXES
from lucidyolo.errors import UserError


def resolve_sources(source: str) -> list[Path]:
    """Image files named by ``source``, sorted.

    Raises:
        UserError: nothing matches, or a named file is not an image type.
    """
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    elif path.is_file():
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            raise UserError(
                f"--source {source} is not an image file (suffix {path.suffix or 'none'}).",
                fix=f"Use an image ({', '.join(IMAGE_SUFFIXES)}), a folder of images or a glob.",
            )
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise UserError(
            f"--source {source} matches no image.", fix="Give an image file, a folder of images or a quoted glob."
        )
    return files
