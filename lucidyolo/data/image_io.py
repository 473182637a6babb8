"""Image decoding with user-friendly failures.

One place decodes every image the data layer reads, so a truncated or non-image
file always becomes a :class:`~lucidyolo.errors.DataError` naming the file, and
every reader gets the same 8-bit RGB from high-bit-depth files.

Every message about one file starts with ``Image file {path} ``;
:func:`image_error_reason` strips it so a list of bad files reads
``path: reason``.

Every open checks the header's width x height against ``data.max_image_pixels``
(:mod:`lucidyolo.data.pixel_limit`) before any pixel is decoded: a small file can
declare a 900-megapixel image (a "decompression bomb") whose decode would take
gigabytes. Pillow's own check (an exception that is not an ``OSError``, and a
warning below it) is lifted while lucid opens a file, so lucid's limit is the
only one and its refusal is a :class:`~lucidyolo.errors.DataError` like any
other bad file.
"""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from lucidyolo.data.pixel_limit import max_image_pixels
from lucidyolo.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")

#: Pillow's modes of one 16-bit unsigned gray channel (the byte order is decoded by Pillow).
GRAY16_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
#: Pillow's 32-bit signed gray mode; 16-bit PNGs and TIFFs open as it in some Pillow versions.
INT32_MODE = "I"
#: Pillow's 32-bit float gray mode (float TIFFs): no fixed value range, refused.
FLOAT_MODE = "F"
_EXIF_ORIENTATION = 0x0112
_BAD_FILE_FIX = "Remove or replace the file; `lucid data check` lists every bad file."
#: The words of the message of a file whose header reads but whose pixels do not decode.
DECODE_FAILED = "cannot be decoded"

#: Held while Pillow's own pixel limit is lifted (:func:`open_image`).
_PIL_LIMIT_LOCK = threading.Lock()


def refuse_oversized(hw: tuple[int, int], path: Path) -> None:
    """Raise :class:`DataError` when an image of ``hw = (height, width)`` exceeds :func:`max_image_pixels`."""
    limit = max_image_pixels()
    h, w = hw
    if h * w <= limit:
        return
    raise DataError(
        f"Image file {path} is {h * w / 1e6:.1f} megapixels ({w}x{h}), above the limit of {limit / 1e6:.1f} "
        "megapixels (data.max_image_pixels).",
        why=f"decoding it would take {h * w * 3 / 1e9:.1f} GB of memory; a small file declaring an image this large is "
        "a \"decompression bomb\" (or a whole aerial or satellite scene), and lucid refuses it before decoding.",
        fix="Cut a real gigapixel scene into training tiles with `lucid data tile dota`, or raise the limit "
        f"(`lucid fit --data.max_image_pixels {_round_up(h * w)}`; predict uses the run's); else remove or replace "
        "the file.",
    )


def _round_up(pixels: int) -> int:
    step = 10**max(0, len(str(pixels)) - 2)  # two significant digits
    return -(-pixels // step) * step


@contextmanager
def open_image(path: str | Path, data: io.BytesIO | None = None) -> Iterator[Image.Image]:
    """``Image.open(path)`` with lucid's pixel limit in place of Pillow's (see the module docstring).

    Only the header is read here. ``data``: the file's bytes already in memory
    (opened instead of ``path``, which then only names the file in messages).

    Raises:
        DataError: the header declares more than :func:`max_image_pixels` pixels.
        FileNotFoundError, UnidentifiedImageError, OSError ...: as ``Image.open``.
    """
    # Pillow reads its limit from a module global; the lock keeps two threads of this process from
    # restoring each other's value. Other Pillow users see no limit only during this header read.
    with _PIL_LIMIT_LOCK:
        pil_limit = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            im = Image.open(path if data is None else data)
        finally:
            Image.MAX_IMAGE_PIXELS = pil_limit
    with im:
        w, h = im.size
        refuse_oversized((h, w), Path(path))
        yield im


class BadImagesError(DataError):
    """Several image files of a split cannot be used; ``bad`` holds every one.

    Args:
        what, why, fix: as for :class:`~lucidyolo.errors.DataError` (``what``
            names the count and the first file).
        bad: ``(path, reason)`` of every bad file, ``reason`` from
            :func:`image_error_reason`. Not carried through pickling or a
            re-raise as ``type(err)(err.what, ...)``: the message is.
    """

    def __init__(self, what: str, why: str | None = None, fix: str | None = None, *, bad: list[tuple[Path, str]] | None = None,
                 rest: Any = None) -> None:
        super().__init__(what, why=why, fix=fix)
        self.bad = list(bad or [])
        self.rest = rest
        """The split without the bad files (an ImageSource), when the reader could build it:
        ``lucid fit --data.skip_bad_images`` trains on it."""


def image_error_reason(exc: DataError, path: Path) -> str:
    """A message of this module about ``path`` as a reason without the path.

    ``"Image file /d/a.png is truncated."`` -> ``"is truncated"``; a fix other
    than "remove or replace the file" (a float image must be converted) is
    kept in parentheses.
    """
    reason = exc.what.removeprefix(f"Image file {path} ").removesuffix(".")
    if exc.fix and exc.fix != _BAD_FILE_FIX and not exc.fix.startswith("Check the dataset root"):
        reason += f" (fix: {exc.fix[0].lower()}{exc.fix[1:].removesuffix('.')})"
    return reason


@dataclass(frozen=True)
class ImageHeader:
    """What an image file's header says, read without decoding pixels.

    Attributes:
        hw: ``(height, width)`` as stored (the EXIF orientation is not applied).
        mode: Pillow's mode (``RGB``, ``L``, ``I;16``, ``F`` ...).
        orientation: the EXIF Orientation tag that decoding does not apply
            (2..8); 1 when absent, 1, or applied by the decoder itself
            (Pillow rotates a TIFF by its tag: its size and pixels come back
            rotated, so nothing is ignored).
    """

    hw: tuple[int, int]
    mode: str
    orientation: int


def read_image(path: str | Path) -> np.ndarray:
    """Decode an image file to 8-bit RGB.

    16-bit gray (and 32-bit integer gray holding 0..65535) is scaled to 8 bits
    as ``round(v / 257)`` (65535 -> 255) and replicated to 3 channels; Pillow
    itself reduces 16-bit RGB, RGBA and gray+alpha PNGs to their high byte
    (``v >> 8``) on decode. Alpha is dropped. The EXIF orientation is ignored
    (except by Pillow's TIFF decoder, which applies it; see :class:`ImageHeader`).

    Returns:
        ``(H, W, 3)`` uint8 array, RGB order.

    Raises:
        DataError: the file is missing, truncated or not an image, holds
            floating-point pixels, or 32-bit integers outside 0..65535, or
            declares more than ``data.max_image_pixels`` pixels (refused
            before decoding).
    """
    path = Path(path)
    try:
        with open_image(path) as im:
            refuse_unscalable_mode(im.mode, path)
            im.load()
            return pil_to_rgb8(im, path)
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(
            f"Image file {path} {DECODE_FAILED} ({exc}).",
            why="the file is truncated, corrupt or not an image.",
            fix=_BAD_FILE_FIX,
        ) from exc


def refuse_unscalable_mode(mode: str, path: Path) -> None:
    """Raise :class:`DataError` for a mode whose pixels have no known range (float)."""
    if mode == FLOAT_MODE:
        raise DataError(
            f"Image file {path} holds floating-point pixels (Pillow mode F).",
            why="lucid trains on 8-bit RGB and a float image has no fixed value range to scale from; "
            "converting it as is would clip it to black or white.",
            fix="Convert it to an 8-bit (or 16-bit integer) PNG or TIFF, scaling its values to the full range.",
        )


def pil_to_rgb8(im: Image.Image, path: Path) -> np.ndarray:
    """A loaded Pillow image as ``(H, W, 3)`` uint8 RGB (see :func:`read_image` for the scaling).

    Raises:
        DataError: float pixels, or 32-bit integers outside 0..65535.
    """
    refuse_unscalable_mode(im.mode, path)
    if im.mode in GRAY16_MODES or im.mode == INT32_MODE:
        v = np.asarray(im)
        if im.mode == INT32_MODE and v.size and (int(v.min()) < 0 or int(v.max()) > 65535):
            raise DataError(
                f"Image file {path} holds 32-bit integer pixels from {int(v.min())} to {int(v.max())}.",
                why="lucid reads 32-bit integer images as 16-bit (0..65535) and scales them to 8 bits; "
                "values outside that range have no meaning it can know.",
                fix="Convert it to an 8-bit or 16-bit PNG or TIFF, scaling its values to that range.",
            )
        # v / 257 never ends in exactly .5 for an integer v (257 is odd), so this floor is round().
        v8 = ((v.astype(np.uint32) + 128) // 257).astype(np.uint8)
        return np.repeat(v8[:, :, None], 3, axis=2)
    if im.mode != "RGB":
        im = im.convert("RGB")
    return np.asarray(im).copy()


def read_image_size(path: str | Path) -> tuple[int, int]:
    """Read ``(height, width)`` from the file header without decoding pixels.

    Raises:
        DataError: the file is missing, not a readable image, or larger than
            ``data.max_image_pixels`` (:func:`refuse_oversized`).
    """
    path = Path(path)
    try:
        with open_image(path) as im:
            w, h = im.size
            return h, w
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"Image file {path} is not a readable image ({exc}).", fix=_BAD_FILE_FIX) from exc


def read_image_header(path: str | Path) -> ImageHeader:
    """Size, mode and EXIF orientation from the file header, without decoding pixels.

    A PNG's orientation is read only from an ``eXIf`` chunk before the pixel
    data: Pillow finds a later one only by decoding the whole image.

    Raises:
        DataError: the file is missing, not a readable image, or larger than
            ``data.max_image_pixels`` (:func:`refuse_oversized`).
    """
    path = Path(path)
    try:
        with open_image(path) as im:
            w, h = im.size
            return ImageHeader((h, w), im.mode, _orientation(im))
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"Image file {path} is not a readable image ({exc}).", fix=_BAD_FILE_FIX) from exc


def _orientation(im: Image.Image) -> int:
    if im.format == "TIFF":
        return 1  # Pillow's TIFF decoder applies the tag (see ImageHeader)
    if im.format == "PNG" and "exif" not in im.info:
        return 1  # PngImageFile.getexif() would decode every pixel looking for a late eXIf chunk
    try:
        value = im.getexif().get(_EXIF_ORIENTATION, 1)
        return int(value) if 1 <= int(value) <= 8 else 1
    except (ValueError, TypeError, SyntaxError, OSError, KeyError, struct.error):
        return 1  # a malformed EXIF block: the pixels are still usable, and lucid ignores the tag anyway


def read_image_fast(path: str | Path) -> np.ndarray:
    """Decode an image file to RGB, using libjpeg-turbo through torchvision for JPEG.

    Same contract as :func:`read_image` (``(H, W, 3)`` uint8 RGB, no EXIF
    rotation, :class:`DataError` for bad files and for files above
    ``data.max_image_pixels``, checked on the header before decoding). torchvision's
    ``decode_jpeg`` measured ~10-30% faster than Pillow on COCO JPEGs on one
    thread; other formats (16-bit PNG and TIFF among them) go through
    :func:`read_image`.
    """
    path = Path(path)
    if path.suffix.lower() not in (".jpg", ".jpeg"):
        return read_image(path)
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        data = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError as exc:
        raise DataError(f"Image file {path} does not exist.", fix="Check the dataset root and its split paths.") from exc
    # libjpeg-turbo has no pixel limit: read the size from the bytes in hand first (Pillow parses
    # the markers up to the first scan, tens of microseconds against milliseconds for the decode)
    try:
        with open_image(path, io.BytesIO(data.tobytes())):
            pass  # opening is the check (DataError above the limit)
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return read_image(path)  # Pillow names what is wrong with the file
    try:
        chw = decode_jpeg(torch.from_numpy(data), mode=ImageReadMode.RGB)
    except (RuntimeError, ValueError):
        # Unusual JPEG flavours libjpeg-turbo refuses here; Pillow reports real corruption.
        return read_image(path)
    return chw.permute(1, 2, 0).numpy()
