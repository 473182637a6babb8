"""``--save-json`` image ids: the file's number when every file is a distinct number, else none (1, 2, ... in order)."""

from __future__ import annotations

from pathlib import Path

from lucidyolo.predict.items import image_ids


def test_numbered_files_keep_their_number():
    files = [Path("a/000000000139.jpg"), Path("a/000000000285.png")]
    assert image_ids(files) == {files[0]: 139, files[1]: 285}


def test_names_clashing_numbers_and_videos_count_in_order_instead():
    assert image_ids([Path("a/139.jpg"), Path("a/cat.jpg")]) is None
    assert image_ids([Path("a/0139.jpg"), Path("b/139.jpg")]) is None  # both would be 139
    assert (
        image_ids([Path("a/1.jpg"), Path("a/2.mp4")]) is None
    )  # frames have no number of their own
