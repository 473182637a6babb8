"""What ``Model.predict`` accepts as a source: images read lazily as ``(H, W, 3)`` uint8 RGB, video frames on demand.

A numpy array is taken in the channel order ``channels`` names: ``"bgr"`` by default, the order
OpenCV (``cv2.imread``, ``cv2.VideoCapture``) and other YOLO trainers' Python APIs hand and expect,
so a frame from those is not silently colour-swapped; ``"rgb"`` for arrays from PIL, imageio or
matplotlib. Files and PIL images carry their own order and ignore it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucidyolo.errors import UserError

if TYPE_CHECKING:
    import numpy as np

ImageItem = tuple[Path | None, Callable[[], "np.ndarray"]]
"""``(file or None, read())``: ``read`` returns the image ``(H, W, 3)`` uint8 RGB."""

FrameItem = tuple[Path | None, int | None, Callable[[], "np.ndarray"]]
"""``(file or None, frame index in its video or None, read())``, as :data:`ImageItem` plus the frame."""

_FIX = ("Pass an image path, a folder, a glob, an (H, W, 3) uint8 numpy array (BGR by default; "
        "channels='rgb' for RGB), a PIL image, or a list of these.")


def image_items(source: Any, channels: str = "bgr") -> list[ImageItem]:
    """Every image ``source`` names, in order; files are read only when their ``read`` is called.

    ``source`` is a path / folder / glob (``str`` or :class:`~pathlib.Path`, as ``lucid predict --source``),
    an ``(H, W, 3)`` uint8 array in ``channels`` order (``(H, W)`` grayscale is repeated into three
    channels), a PIL image (converted to RGB), or a list / tuple of those.

    Raises:
        UserError: nothing matches a path, a file is not an image type (a video included: those are read
            by ``Model.predict(..., stream=True)``), an array of another shape or dtype, an object of another type.
    """
    items: list[ImageItem] = []
    for path, video, read in _entries(source, channels):
        if video:
            raise UserError(
                f"Model.predict reads images; {path} is a video.",
                why="a video's frames would all be held in memory as Prediction objects.",
                fix="Use Model.predict(VIDEO, stream=True) (one Prediction per frame, read as they come), "
                    "or `lucid predict --source VIDEO --save DIR` (an annotated video and one JSON line per frame).",
            )
        items.append((path, read))
    return items


def stream_items(source: Any, channels: str = "bgr") -> Iterator[FrameItem]:
    """Every image and video frame ``source`` names, in order, each read when its ``read`` is called.

    The source is checked when this is called (a bad one raises here, not at the first frame);
    a video is opened when its turn comes and decoded frame by frame (PyAV), so a long one is never
    held in memory. The frame index is the frame's position in the video (a damaged frame leaves a gap).

    Raises:
        UserError: as :func:`image_items`, videos excepted.
    """
    entries = _entries(source, channels)

    def frames() -> Iterator[FrameItem]:
        for path, video, read in entries:
            if not video:
                yield path, None, read
                continue
            from lucidyolo.predict.video import VideoReader

            assert path is not None
            with VideoReader(path) as reader:
                for index, frame in reader.frames_at():
                    yield path, index, (lambda f=frame: f)

    return frames()


def _entries(source: Any, channels: str) -> list[tuple[Path | None, bool, Callable[[], np.ndarray]]]:
    """``(file or None, is a video, read())`` for every file, array or image ``source`` names."""
    if isinstance(source, list | tuple):
        out = []
        for s in source:
            if isinstance(s, list | tuple):
                raise UserError("Model.predict got a nested list of sources.", fix=_FIX)
            out += _entries(s, channels)
        if not out:
            raise UserError("Model.predict got an empty list of sources.", fix=_FIX)
        return out
    if isinstance(source, str | Path):
        from lucidyolo.predict.sources import is_video, resolve_sources

        return [(f, is_video(f), _reader(f)) for f in resolve_sources(str(source))]
    array = _as_array(source, channels)
    return [(None, False, lambda: array)]


def _reader(path: Path) -> Callable[[], np.ndarray]:
    def read() -> np.ndarray:
        from lucidyolo.data.image_io import read_image_fast

        return read_image_fast(path)  # libjpeg-turbo for JPEG, as `lucid predict` and validation decode

    return read


def _as_array(obj: Any, channels: str) -> np.ndarray:
    """An in-memory image as a contiguous ``(H, W, 3)`` uint8 RGB array (a numpy one flipped when ``channels='bgr'``)."""
    import numpy as np

    if hasattr(obj, "convert") and hasattr(obj, "mode") and hasattr(obj, "size"):  # a PIL image: RGB by its mode
        return np.ascontiguousarray(np.asarray(obj.convert("RGB"), dtype=np.uint8))
    if not isinstance(obj, np.ndarray):
        raise UserError(f"Model.predict cannot read a source of type {type(obj).__name__}.", fix=_FIX)
    if obj.dtype != np.uint8:
        raise UserError(
            f"Model.predict got an image array of dtype {obj.dtype}, not uint8.",
            why="the model was trained on 8-bit images; other ranges would be read wrongly.",
            fix="Convert it first, e.g. `(x * 255).clip(0, 255).astype(np.uint8)` for floats in [0, 1].",
        )
    if obj.ndim == 2:
        obj = np.repeat(obj[:, :, None], 3, axis=2)
    if obj.ndim != 3 or obj.shape[2] != 3 or obj.shape[0] < 1 or obj.shape[1] < 1:
        raise UserError(
            f"Model.predict got an image array of shape {tuple(obj.shape)}, not (H, W, 3).",
            why="an image is height x width x 3 colour channels (channels last).",
            fix="Transpose a (3, H, W) array with `x.transpose(1, 2, 0)`; drop an alpha channel with `x[..., :3]`.",
        )
    if channels == "bgr":
        obj = obj[:, :, ::-1]  # the model reads RGB
    return np.ascontiguousarray(obj)
