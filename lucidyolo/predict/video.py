"""Read and write video files for ``lucid predict`` with PyAV (the optional ``video`` extra).

PyAV wraps FFmpeg and ships it (with libx264) in its wheels; it is imported only
when a source is a video, so images alone never need it (docs/DECISIONS.md says
why PyAV rather than torchvision, torchcodec or OpenCV). Frames travel as
``(H, W, 3)`` uint8 RGB arrays, as images do. The annotated video is H.264 in
MP4, written at the source's average frame rate with one output frame per
decoded frame, so it has as many frames as the source and the same duration.
A packet FFmpeg cannot decode is skipped (the reader reports which frames were
lost) rather than ending the video; the output holds the previous frame there.
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


def _reason(exc: Exception | None) -> str:
    """FFmpeg's words for ``exc`` (``Invalid data found when processing input``), without errno and function."""
    return str(getattr(exc, "strerror", None) or exc)


def frame_ranges(indices: list[int]) -> str:
    """``[3, 4, 5, 9]`` as ``"3-5, 9"``."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


UNTIMED_FORMATS = {"avi"}
"""Demuxers whose timestamps are not presentation times (AVI's come from the decode order: with
B-frames they go back and forth), so frames are counted in order instead."""


class VideoReader:
    """The frames of one video file, decoded in order.

    Attributes:
        path: the file.
        fps: the video stream's average frame rate (frames per second, a ``Fraction``).
        frames: the frame count the container declares (0 when it declares none).
        height, width: frame size in pixels.
        damaged, decoded, skipped: after :meth:`frames_at`, packets that did not decode, frames that
            did, and the source frame indices lost.

    Raises:
        NotAvailableError: PyAV is not installed.
        DataError: the file has no decodable video stream.
    """

    def __init__(self, path: Path) -> None:
        av = require_av()
        self.path = path
        self.damaged, self.decoded, self.skipped = 0, 0, []  # filled by frames_at
        self.located = True  # the skipped frames are known (timestamps that are presentation times)
        self._first_error: Exception | None = None
        self._read_error: Exception | None = None
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
        """``(H, W, 3)`` uint8 RGB frames in presentation order (those that decode; see :meth:`frames_at`)."""
        for _, image in self.frames_at():
            yield image

    def frames_at(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(index, (H, W, 3) uint8 RGB frame)`` in presentation order, skipping what does not decode.

        ``index`` is the frame's position in the source from its timestamp (``(pts - start) * fps``,
        kept increasing), so a frame lost to a damaged packet leaves a gap rather than renumbering
        the rest; a clean constant-rate video counts 0, 1, 2, ... Where the timestamps are not
        presentation times (AVI, or any that go backwards), frames are counted in order. A packet FFmpeg
        refuses is counted in :attr:`damaged` and decoding goes on with the next one; :meth:`damage`
        then describes what was lost. A read error ends the video there.

        Raises:
            DataError: not one frame decoded (every packet damaged, or no frame at all).
        """
        av = require_av()
        tb = self._stream.time_base
        origin = self._stream.start_time
        timed = tb is not None and not set(self._container.format.name.split(",")) & UNTIMED_FORMATS
        last, last_pts = -1, None
        gaps: list[int] = []  # frames the timestamps skip: lost ones when damage was seen, else a variable rate
        self.damaged, self.decoded, self.skipped = 0, 0, []
        self._first_error = self._read_error = None
        self.located = True
        packets = self._container.demux(self._stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except av.FFmpegError as exc:  # the container cannot be read past here (e.g. a truncated file)
                self._read_error = exc
                break
            try:
                frames = packet.decode()  # the last, empty packet flushes the decoder
            except av.FFmpegError as exc:
                self.damaged += 1
                self._first_error = self._first_error or exc
                continue
            for frame in frames:
                index = last + 1
                if timed and frame.pts is not None and (last_pts is None or frame.pts > last_pts):
                    origin = frame.pts if origin is None else origin
                    index = max(index, round((frame.pts - origin) * tb * self.fps))
                    last_pts = frame.pts
                elif timed:  # no timestamp, or one going backwards: counted from here on
                    timed = self.located = False
                gaps += range(last + 1, index)
                last = index
                self.decoded += 1
                yield index, frame.to_ndarray(format="rgb24")
        if self.damaged or self._read_error:
            self.skipped = gaps + list(range(last + 1, self.frames))  # and lost at the end, up to the declared count
            self.located = self.located and timed
        if not self.decoded:
            raise self._undecodable()

    def _undecodable(self) -> DataError:
        cause = self._first_error or self._read_error
        if cause is None:
            return DataError(
                f"{self.path} holds no video frame.",
                why="its video stream is empty.",
                fix="Check that the file plays, or remove it from --source.",
            )
        what = (f"{self.damaged} damaged packet{'s' * (self.damaged != 1)} and none that decodes" if self.damaged
                else "its video data could not be read")
        return DataError(
            f"No frame of {self.path} could be decoded: {what} ({_reason(cause)}).",
            why="the container opened, but the video data in it is damaged (or in a codec this FFmpeg cannot decode).",
            fix="Check that the file plays; re-encode what is readable (e.g. `ffmpeg -err_detect ignore_err -i in "
            "-c:v libx264 out.mp4`) or remove it from --source.",
        )

    def damage(self) -> str | None:
        """After :meth:`frames_at`: one line on the packets that did not decode and the frames skipped, or None."""
        if not self.damaged and self._read_error is None:
            return None
        parts = []
        if self.damaged:
            cause = self._first_error
            parts.append(f"{self.damaged} damaged packet{'s' * (self.damaged != 1)} could not be decoded "
                         f"({_reason(cause)})")
        if self._read_error is not None:
            parts.append(f"the file could not be read past frame {self.decoded + len(self.skipped)} "
                         f"({_reason(self._read_error)})")
        of = f" of {self.frames}" if self.frames else ""
        if not self.located:
            lost = f"which frames were lost is unknown (the file's timestamps do not say){of}"
        elif self.skipped:
            lost = f"skipped frame{'s' * (len(self.skipped) != 1)} {frame_ranges(self.skipped)}{of}"
        else:
            lost = "no frame is missing (the decoder concealed the damage)"
        return f"{self.path}: {'; '.join(parts)}; {lost}; the other {self.decoded} frames were predicted."

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
        self._next = 0  # the pts of the next frame at the earliest

    def write(self, image: np.ndarray, index: int | None = None) -> None:
        """Append one ``(H, W, 3)`` uint8 RGB frame, shown at ``index / fps`` (default: right after the last).

        A source frame that did not decode leaves a gap in the indices: the previous frame stays on
        screen for it, so the output keeps the source's timing.
        """
        frame = self._av.VideoFrame.from_ndarray(
            np.ascontiguousarray(even_frame(image)), format="rgb24"
        )
        # one tick of 1 / fps per frame: no frame dropped or repeated
        frame.pts = self._next if index is None else max(index, self._next)
        self._next = frame.pts + 1
        self._container.mux(self._stream.encode(frame))
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and write the MP4 index."""
        self._container.mux(self._stream.encode(None))
        self._container.close()
