"""Image decoding with user-friendly failures.

One place decodes every image the data layer reads, so a truncated or non-image
file always becomes a :class:`~lucidyolo.errors.DataError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from lucidyolo.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


def read_image(path: str | Path) -> np.ndarray:
    """Decode an image file to RGB.

    Returns:
        ``(H, W, 3)`` uint8 array, RGB order.

    Raises:
        DataError: the file is missing, truncated or not an image.
    """
    path = Path(path)
    try:
        with Image.open(path) as im:
            im.load()
            if im.mode != "RGB":
                im = im.convert("RGB")
            return np.asarray(im).copy()
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(
            f"Image file {path} cannot be decoded ({exc}).",
            why="the file is truncated, corrupt or not an image.",
            fix="Remove or replace the file; `lucid data check` lists every bad file.",
        ) from exc


def read_image_size(path: str | Path) -> tuple[int, int]:
    """Read ``(height, width)`` from the file header without decoding pixels."""
    path = Path(path)
    try:
        with Image.open(path) as im:
            w, h = im.size
            return h, w
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(
            f"Image file {path} is not a readable image ({exc}).",
            fix="Remove or replace the file; `lucid data check` lists every bad file.",
        ) from exc


def read_image_fast(path: str | Path) -> np.ndarray:
    """Decode an image file to RGB, using libjpeg-turbo through torchvision for JPEG.

    Same contract as :func:`read_image` (``(H, W, 3)`` uint8 RGB, no EXIF
    rotation, :class:`DataError` for bad files). torchvision's
    ``decode_jpeg`` measured ~10-30% faster than Pillow on COCO JPEGs on one
    thread; other formats go through :func:`read_image`.
    """
    path = Path(path)
    if path.suffix.lower() not in (".jpg", ".jpeg"):
        return read_image(path)
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        data = np.fromfile(path, dtype=np.uint8)
        chw = decode_jpeg(torch.from_numpy(data), mode=ImageReadMode.RGB)
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    except (RuntimeError, ValueError):
        # Unusual JPEG flavours libjpeg-turbo refuses here; Pillow reports real corruption.
        return read_image(path)
    return chw.permute(1, 2, 0).numpy()
