"""What ``Model.predict`` accepts as a source, as a list of lazily read ``(H, W, 3)`` uint8 RGB images."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucidyolo.errors import UserError

if TYPE_CHECKING:
    import numpy as np

ImageItem = tuple[Path | None, Callable[[], "np.ndarray"]]
"""``(file or None, read())``: ``read`` returns the image ``(H, W, 3)`` uint8 RGB."""

_FIX = ("Pass an image path, a folder, a glob, an (H, W, 3) uint8 RGB numpy array, a PIL image, "
        "or a list of these.")


def image_items(source: Any) -> list[ImageItem]:
    """Every image ``source`` names, in order; files are read only when their ``read`` is called.

    ``source`` is a path / folder / glob (``str`` or :class:`~pathlib.Path`, as ``lucid predict --source``),
    an ``(H, W, 3)`` uint8 RGB array (``(H, W)`` grayscale is repeated into three channels), a PIL image
    (converted to RGB), or a list / tuple of those.

    Raises:
        UserError: nothing matches a path, a file is not an image type (a video included), an array of another shape or dtype,
            an object of another type.
    """
    if isinstance(source, list | tuple):
        items: list[ImageItem] = []
        for s in source:
            if isinstance(s, list | tuple):
                raise UserError("Model.predict got a nested list of sources.", fix=_FIX)
            items += image_items(s)
        if not items:
            raise UserError("Model.predict got an empty list of sources.", fix=_FIX)
        return items
    if isinstance(source, str | Path):
        from lucidyolo.predict.sources import is_video, resolve_sources

        files = resolve_sources(str(source))
        videos = [f for f in files if is_video(f)]
        if videos:
            raise UserError(
                f"Model.predict reads images; {videos[0]} is a video.",
                why="a video's frames would all be held in memory as Prediction objects.",
                fix="Run `lucid predict --source VIDEO --save DIR` (an annotated video and one JSON line per "
                    "frame), or pass its frames as arrays in batches.",
            )
        return [(f, _reader(f)) for f in files]
    array = _as_array(source)
    return [(None, lambda: array)]


def _reader(path: Path) -> Callable[[], np.ndarray]:
    def read() -> np.ndarray:
        from lucidyolo.data.image_io import read_image_fast

        return read_image_fast(path)  # libjpeg-turbo for JPEG, as `lucid predict` and validation decode

    return read


def _as_array(obj: Any) -> np.ndarray:
    """An in-memory image as a contiguous ``(H, W, 3)`` uint8 RGB array."""
    import numpy as np

    if hasattr(obj, "convert") and hasattr(obj, "mode") and hasattr(obj, "size"):  # a PIL image
        return np.ascontiguousarray(np.asarray(obj.convert("RGB"), dtype=np.uint8))
    if not isinstance(obj, np.ndarray):
        raise UserError(f"Model.predict cannot read a source of type {type(obj).__name__}.", fix=_FIX)
    if obj.dtype != np.uint8:
        raise UserError(
            f"Model.predict got an image array of dtype {obj.dtype}, not uint8.",
            why="the model was trained on 8-bit RGB images; other ranges would be read wrongly.",
            fix="Convert it first, e.g. `(x * 255).clip(0, 255).astype(np.uint8)` for floats in [0, 1].",
        )
    if obj.ndim == 2:
        obj = np.repeat(obj[:, :, None], 3, axis=2)
    if obj.ndim != 3 or obj.shape[2] != 3 or obj.shape[0] < 1 or obj.shape[1] < 1:
        raise UserError(
            f"Model.predict got an image array of shape {tuple(obj.shape)}, not (H, W, 3).",
            why="an image is height x width x RGB (channels last).",
            fix="Transpose a (3, H, W) array with `x.transpose(1, 2, 0)`; drop an alpha channel with `x[..., :3]`.",
        )
    return np.ascontiguousarray(obj)
