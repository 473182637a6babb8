"""`lucid data check` warns about images whose EXIF orientation lucid ignores, reading headers only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from lucidyolo.data.image_io import read_image, read_image_header

from .conftest import run_data_cli


def _save_with_orientation(path: Path, orientation: int, size: tuple[int, int] = (32, 32), **kw) -> Path:
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.new("RGB", size, (200, 30, 30)).save(path, exif=exif, **kw)
    return path


def test_header_reads_the_tag_without_decoding_pixels(tmp_path, monkeypatch):
    jpg = _save_with_orientation(tmp_path / "a.jpg", 6)
    png = _save_with_orientation(tmp_path / "a.png", 8)
    webp = _save_with_orientation(tmp_path / "a.webp", 3)
    plain = tmp_path / "b.png"
    Image.new("RGB", (4, 4)).save(plain)

    def no_decode(self):
        raise AssertionError("pixels decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    assert [read_image_header(p).orientation for p in (jpg, png, webp, plain)] == [6, 8, 3, 1]
    assert read_image_header(jpg).hw == (32, 32)


def test_tiff_orientation_is_applied_by_pillow_so_not_reported(tmp_path):
    # Pillow turns a TIFF by its tag (size and pixels): lucid then ignores nothing, so no warning.
    a = np.zeros((2, 4, 3), np.uint8)
    a[0, 0] = 255
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(a).save(tmp_path / "t.tif", exif=exif)
    head = read_image_header(tmp_path / "t.tif")
    assert head.orientation == 1 and head.hw == (4, 2)
    assert read_image(tmp_path / "t.tif").shape == (4, 2, 3)  # if this changes, TIFFs must be counted too


@pytest.fixture
def rotated_root(synth, tmp_path) -> tuple[Path, list[Path]]:
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=8, size=32), root)
    images = sorted((root / "images" / "train").iterdir())
    turned = [_save_with_orientation(images[i], o) for i, o in ((0, 6), (2, 3), (3, 8), (5, 2))]
    return root, turned


def test_check_warns_once_per_split_with_count_examples_and_fix(rotated_root):
    root, turned = rotated_root
    r = run_data_cli("check", "--data-root", str(root))
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, out
    assert out.count("EXIF Orientation") == 1
    assert "warning (train): 4 image(s) carry an EXIF Orientation tag" in out
    assert f"({turned[0]}, {turned[1]}, {turned[2]}, ...)" in out  # a few examples, not all
    assert "lucid ignores the tag and uses the pixels in their stored order" in out
    assert "PIL.ImageOps.exif_transpose" in out
    rep = json.loads(run_data_cli("check", "--data-root", str(root), "--json").stdout)
    assert [s["exif_rotated_images"] for s in rep["splits"]] == [4, 0]
