"""PyAV reader and writer: every frame written comes back, at the frame rate given, odd sides made even."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lucidyolo.errors import DataError

pytest.importorskip("av")


def test_frames_written_come_back_in_order_at_the_rate_given(tmp_path):
    from lucidyolo.predict.video import VideoReader, VideoWriter

    path = tmp_path / "odd.mp4"
    frames = []
    for i in range(7):
        image = np.full((63, 81, 3), 30, np.uint8)
        image[:, 10 * i : 10 * i + 8] = 230  # a bright bar moving right: frame order is visible
        frames.append(image)
    with open(path, "wb") as out:
        writer = VideoWriter(out, Fraction(30000, 1001), 63, 81)
        for image in frames:
            writer.write(image)
        writer.close()
    with VideoReader(path) as video:
        assert video.fps == Fraction(30000, 1001) and (video.height, video.width) == (64, 82)
        back = list(video)
    assert len(back) == 7 and back[0].shape == (64, 82, 3)
    for i, image in enumerate(
        back
    ):  # the bar is where it was drawn (H.264 is lossy: compare columns)
        columns = image[:63, :81].mean(axis=(0, 2))
        assert abs(int(np.argmax(columns)) - (10 * i + 4)) <= 4


def test_a_file_that_is_not_a_video_is_a_data_error(tmp_path):
    from lucidyolo.predict.video import VideoReader

    path = tmp_path / "notes.mp4"
    path.write_text("not a video\n")
    with pytest.raises(DataError, match="cannot be decoded as a video"):
        VideoReader(path)
