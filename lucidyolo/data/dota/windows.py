"""Where the tiles of a scene sit: window starts along an axis, the patch/overlap check, the windows.

Along each axis, windows of ``patch`` pixels start at ``0, stride, 2*stride,
...`` with ``stride = patch - overlap`` while the window still falls short of
the far edge; one last window then sits flush with that edge, so every pixel is
covered and no tile is padded. An axis shorter than the patch gets one window
at 0 and the tile keeps the axis's true (smaller) size. Windows are ``(x0, y0,
x1, y1)`` integer pixels, ``x1`` exclusive, in row-major order (y, then x).
"""

from __future__ import annotations

from lucidyolo.errors import DataError

Window = tuple[int, int, int, int]


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
