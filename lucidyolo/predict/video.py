"""Read and write video files for ``lucid predict`` with PyAV (the optional ``video`` extra).

PyAV wraps FFmpeg and ships it (with libx264) in its wheels; it is imported only
when a source is a video, so images alone never need it (docs/DECISIONS.md says
why PyAV rather than torchvision, torchcodec or OpenCV). Frames travel as
``(H, W, 3)`` uint8 RGB arrays, as images do. The annotated video is H.264 in
MP4, written at the source's average frame rate with one output frame per
decoded frame, so it has as many frames as the source and the same duration.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import numpy as np

from lucidyolo.errors import DataError, NotAvailableError

VIDEO_SUFFIXES = (".mp4", ".mov", ".avi", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv")
"""Suffixes ``--source`` reads as videos (anything FFmpeg decodes would do; these are the common ones)."""

OUTPUT_CODEC = "libx264"
OUTPUT_PIX_FMT = "yuv420p"  # what every player decodes; it needs an even width and height
OUTPUT_CRF = "20"  # visually close to the source; drawn captions stay sharp
OUTPUT_PRESET = "veryfast"  # 640 x 480 on the shared 2-core CPU: 25 ms/frame, 71 at x264's default (medium), same size


def require_av() -> ModuleType:
    """The ``av`` module, or :class:`NotAvailableError` saying how to install it."""
    try:
        import av
    except ImportError:
        raise NotAvailableError(
            "Predicting on a video needs PyAV, which is not installed.",
            why="video decoding and encoding is an optional extra, so image-only installs stay small.",
            fix="Install it with `pip install 'lucidyolo[video]'` (or `pip install av`), or extract the frames "
            "as images and point --source at their folder.",
        ) from None
    return av


def _unreadable(path: Path, exc: Exception) -> DataError:
    return DataError(
        f"{path} cannot be decoded as a video ({type(exc).__name__}: {exc}).",
        why="FFmpeg found no readable video stream in it (a truncated or non-video file, or an unknown codec).",
        fix="Check that the file plays; re-encode it (e.g. `ffmpeg -i in -c:v libx264 out.mp4`) or remove it "
        "from --source.",
    )


class VideoReader:
    """The frames of one video file, decoded in order.

    Attributes:
        path: the file.
        fps: the video stream's average frame rate (frames per second, a ``Fraction``).
        frames: the frame count the container declares (0 when it declares none).
        height, width: frame size in pixels.

    Raises:
        NotAvailableError: PyAV is not installed.
        DataError: the file has no decodable video stream.
    """

    def __init__(self, path: Path) -> None:
        av = require_av()
        self.path = path
        try:
            self._container = av.open(str(path))
            if not self._container.streams.video:
                raise ValueError("the file holds no video stream")
            stream = self._container.streams.video[0]
            # frame-parallel decoding: the model is the slow part, not this
            stream.thread_type = "AUTO"
            self._stream = stream
            self.fps: Fraction = Fraction(stream.average_rate or stream.guessed_rate or 25)
            self.frames = int(stream.frames or 0)
            self.height, self.width = int(stream.height), int(stream.width)
        except (av.FFmpegError, ValueError, OSError) as exc:
            self.close()
            raise _unreadable(path, exc) from None

    def __iter__(self) -> Iterator[np.ndarray]:
        """``(H, W, 3)`` uint8 RGB frames in presentation order."""
        av = require_av()
        try:
            for frame in self._container.decode(self._stream):
                yield frame.to_ndarray(format="rgb24")
        except av.FFmpegError as exc:
            raise _unreadable(self.path, exc) from None

    def close(self) -> None:
        container = getattr(self, "_container", None)
        if container is not None:
            container.close()

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def even_frame(image: np.ndarray) -> np.ndarray:
    """``image`` with its last row / column repeated where height / width is odd (``yuv420p`` needs even sides)."""
    h, w = image.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return image
    return np.pad(image, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")


class VideoWriter:
    """H.264 MP4 frames appended one by one at a fixed frame rate into an open binary file.

    Args:
        out: a seekable binary file (MP4 writes its index at the end).
        fps: frames per second of the output (the source's, so the durations agree).
        height, width: frame size; odd sides grow by one repeated pixel row / column.
    """

    def __init__(self, out: IO[bytes], fps: Fraction, height: int, width: int) -> None:
        av = require_av()
        self._container = av.open(out, mode="w", format="mp4")
        self._stream = self._container.add_stream(
            OUTPUT_CODEC, rate=fps, options={"crf": OUTPUT_CRF, "preset": OUTPUT_PRESET}
        )
        self._stream.height, self._stream.width = height + height % 2, width + width % 2
        self._stream.pix_fmt = OUTPUT_PIX_FMT
        self._av = av
        self.frames = 0

    def write(self, image: np.ndarray) -> None:
        """Append one ``(H, W, 3)`` uint8 RGB frame."""
        frame = self._av.VideoFrame.from_ndarray(
            np.ascontiguousarray(even_frame(image)), format="rgb24"
        )
        frame.pts = self.frames  # one tick of 1 / fps per frame: no frame dropped or repeated
        self._container.mux(self._stream.encode(frame))
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and write the MP4 index."""
        self._container.mux(self._stream.encode(None))
        self._container.close()
