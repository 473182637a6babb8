"""16-bit and other high-bit-depth images decode to correctly scaled 8-bit RGB, or are refused clearly.

Expected values are worked out by hand from the rule in DECISIONS: gray 16-bit
``v8 = round(v16 / 257)``; colour 16-bit PNGs come out of Pillow as the high
byte ``v16 >> 8``.
"""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lucidyolo.data.dota.scene import open_scene
from lucidyolo.data.image_io import read_image
from lucidyolo.errors import DataError

from .conftest import run_data_cli

# value -> round(value / 257): 128/257 = 0.498 -> 0, 129/257 = 0.502 -> 1, 1000/257 = 3.89 -> 4,
# 32896 = 128 * 257 -> 128, 65535 = 255 * 257 -> 255
GRAY16 = [0, 128, 129, 257, 1000, 32896, 65535]
GRAY8 = [0, 0, 1, 1, 4, 128, 255]


def _png_header(path: Path) -> tuple[int, int]:
    """(bit depth, colour type) from the IHDR chunk: bytes 24 and 25 of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return data[24], data[25]


def _write_png16(path: Path, rows: np.ndarray, color_type: int) -> None:
    """A 16-bit PNG with exactly these samples (Pillow cannot write 16-bit colour).

    Args:
        rows: ``(H, W, C)`` uint16, C = 3 (colour type 2), 2 (gray+alpha, 4) or 4 (RGBA, 6).
    """
    h, w = rows.shape[:2]
    raw = b"".join(b"\x00" + rows[y].astype(">u2").tobytes() for y in range(h))  # filter 0 per row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _gray16_png(path: Path) -> Path:
    Image.fromarray(np.array([GRAY16, GRAY16[::-1]], dtype=np.uint16)).save(path)
    assert _png_header(path) == (16, 0)  # really 16-bit gray on disk
    return path


def test_16bit_gray_png_scales_to_8_bits_not_white(tmp_path):
    rgb = read_image(_gray16_png(tmp_path / "g.png"))
    assert rgb.dtype == np.uint8 and rgb.shape == (2, 7, 3)
    assert rgb[0, :, 0].tolist() == GRAY8 and rgb[1, :, 0].tolist() == GRAY8[::-1]
    assert (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 0] == rgb[..., 2]).all()


def test_16bit_gray_tiff_and_in_range_int32_tiff_scale_the_same(tmp_path):
    Image.fromarray(np.array([GRAY16], dtype=np.uint16)).save(tmp_path / "g.tif")
    Image.fromarray(np.array([GRAY16], dtype=np.int32)).save(tmp_path / "i.tif")
    assert Image.open(tmp_path / "g.tif").mode.startswith("I;16") and Image.open(tmp_path / "i.tif").mode == "I"
    for name in ("g.tif", "i.tif"):
        assert read_image(tmp_path / name)[0, :, 0].tolist() == GRAY8


def test_int32_beyond_16_bits_and_float_images_are_refused(tmp_path):
    Image.fromarray(np.array([[0, 70000]], dtype=np.int32)).save(tmp_path / "big.tif")
    Image.fromarray(np.array([[0.0, 0.5]], dtype=np.float32)).save(tmp_path / "f.tif")
    with pytest.raises(DataError, match="32-bit integer pixels from 0 to 70000") as e:
        read_image(tmp_path / "big.tif")
    assert e.value.fix and "16-bit" in e.value.fix
    with pytest.raises(DataError, match="floating-point pixels") as e:
        read_image(tmp_path / "f.tif")
    assert e.value.why and e.value.fix and "f.tif" in e.value.what


def test_16bit_colour_pngs_come_out_as_their_high_byte(tmp_path):
    rgb16 = np.array([[[65535, 0, 128], [257, 514, 129], [32896, 1000, 383]]], dtype=np.uint16)
    _write_png16(tmp_path / "c.png", rgb16, 2)
    assert _png_header(tmp_path / "c.png") == (16, 2)
    # v >> 8 by hand: 65535 -> 255, 257 -> 1, 32896 -> 128, 514 -> 2, 1000 -> 3, 128/129 -> 0, 383 -> 1
    want = [[[255, 0, 0], [1, 2, 0], [128, 3, 1]]]
    assert read_image(tmp_path / "c.png").tolist() == want
    assert np.abs(read_image(tmp_path / "c.png") - np.round(rgb16 / 257)).max() <= 1  # within a level of round(v/257)
    rgba16 = np.concatenate([rgb16, np.full((1, 3, 1), 65535, np.uint16)], axis=2)
    _write_png16(tmp_path / "a.png", rgba16, 6)
    assert read_image(tmp_path / "a.png").tolist() == want  # alpha dropped
    la16 = np.stack([np.array([[65535, 257, 32896]], np.uint16), np.full((1, 3), 65535, np.uint16)], axis=2)
    _write_png16(tmp_path / "la.png", la16, 4)
    assert _png_header(tmp_path / "la.png") == (16, 4)
    assert read_image(tmp_path / "la.png").tolist() == [[[255] * 3, [1] * 3, [128] * 3]]


def test_tiler_scales_a_16bit_gray_scene(tmp_path):
    assert np.asarray(open_scene(_gray16_png(tmp_path / "s.png")))[0, :, 1].tolist() == GRAY8


def _yolo_copy(synth, tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=5, size=32), root)
    first = sorted((root / "images" / "train").iterdir())[0]
    first.unlink()
    return root, first


def test_check_decode_passes_a_16bit_png_and_reports_a_float_tiff(synth, tmp_path):
    root, first = _yolo_copy(synth, tmp_path)
    arr = np.tile(np.array(GRAY16 * 5, dtype=np.uint16)[:32], (32, 1))  # 32 x 32, as the synthetic images
    Image.fromarray(arr).save(first.with_suffix(".png"))
    assert _png_header(first.with_suffix(".png")) == (16, 0)
    r = run_data_cli("check", "--data-root", str(root), "--decode")
    assert r.returncode == 0, r.stdout + r.stderr

    first.with_suffix(".png").unlink()
    Image.fromarray(arr.astype(np.float32) / 65535).save(first.with_suffix(".tif"))
    r = run_data_cli("check", "--data-root", str(root), "--decode")
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2 and "Traceback" not in out, out
    assert f"{first.with_suffix('.tif')}: holds floating-point pixels" in out
    assert "fix: convert it to an 8-bit" in out
