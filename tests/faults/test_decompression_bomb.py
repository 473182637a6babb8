"""A decompression bomb (a small file declaring a 900-megapixel image) and other images a header scan misses.

Pillow's own ``DecompressionBombError`` is not an ``OSError``: it went past every
handler and ``data check --decode``, ``fit`` (with ``--data.skip_bad_images``
too) and ``predict`` ended with a 100-line traceback. lucid now refuses the
file from its header against ``data.max_image_pixels``, as a bad file. Also:
a truncated JPEG that the start-up check (headers only) does not count fails
mid-run with a message that says so.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from tests.conftest import run_lucid
from tests.faults import fast_fit_args
from tests.faults.matrix import record
from tests.task_fields import fields_of

SIDE = 30000
"""The bomb's width and height: 900 megapixels, 5x the default limit of ~179 MP."""


def write_bomb(path: Path, side: int = SIDE) -> Path:
    """A 1-bit gray PNG declaring ``side x side`` pixels, written header first: ~100 bytes, in microseconds.

    Its pixel data is one short compressed run (a full one, from Pillow, takes a second to write); the
    size in the IHDR chunk is all that any check reads, and nothing may decode further.
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)  # bit depth 1, gray, no interlace
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    return path


def _yolo_root(out: Path) -> Path:
    from lucidyolo.data.synth import write_synthetic

    return write_synthetic(out, fields_of("det"), 10, img_size=64, seed=0, fmt="yolo", val_fraction=0.2)


def _names_the_bomb(text: str, bomb: Path) -> bool:
    text = " ".join(text.split())
    return (str(bomb) in text and f"is 900.0 megapixels ({SIDE}x{SIDE}), above the limit of 179.0 megapixels "
            "(data.max_image_pixels)" in text and "lucid data tile dota" in text)


def test_data_check_decode_names_the_bomb_and_its_megapixels(tmp_path):
    root = _yolo_root(tmp_path / "data")
    bomb = write_bomb(root / "images" / "train" / "bomb.png")
    r = run_lucid("data", "check", "--data-root", str(root), "--decode", cwd=tmp_path)
    out = r.stdout + r.stderr
    ok = r.returncode == 2 and _names_the_bomb(out, bomb) and "1 bad image file(s) (train)" in " ".join(out.split()) \
        and "Traceback" not in out
    record("data check", "decompression bomb", r.returncode, ok)
    assert ok, out[-3000:]


def test_the_header_scan_of_a_coco_split_refuses_the_bomb(tmp_path):
    """COCO takes sizes from its JSON: the bomb is found by the header-only scan (no --decode)."""
    from tests.faults import tiny_root

    root = tiny_root("det", tmp_path / "data")
    image = sorted((root / "train").glob("*.jpg"))[0]
    write_bomb(image)  # PNG bytes under a .jpg name, as a mislabelled export would leave them
    r = run_lucid("data", "check", "--data-root", str(root), cwd=tmp_path)
    assert r.returncode == 2 and _names_the_bomb(r.stdout + r.stderr, image), (r.stdout + r.stderr)[-3000:]
    assert "Traceback" not in r.stdout + r.stderr


def test_read_image_fast_checks_a_jpeg_header_before_libjpeg_turbo_decodes_it(tmp_path):
    """torchvision's decode_jpeg has no pixel limit: the size is read from the header first."""
    from PIL import Image

    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.errors import DataError

    path = tmp_path / "wide.jpg"
    Image.new("L", (16, 16)).save(path)
    data = bytearray(path.read_bytes())
    sof = data.index(b"\xff\xc0")  # baseline frame header: length (2), precision (1), height (2), width (2)
    data[sof + 5:sof + 9] = struct.pack(">HH", SIDE, SIDE)
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"is 900\.0 megapixels"):
        read_image_fast(path)


@pytest.mark.slow
def test_fit_refuses_the_bomb_naming_it(tmp_path):
    root = _yolo_root(tmp_path / "data")
    bomb = write_bomb(root / "images" / "train" / "bomb.png")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), cwd=tmp_path)
    ok = r.returncode == 2 and _names_the_bomb(r.stderr, bomb) and "Traceback" not in r.stderr
    record("fit det", "decompression bomb", r.returncode, ok)
    assert ok, r.stderr[-3000:]
    assert not any((tmp_path / "runs").glob("version_*"))


@pytest.fixture(scope="module")
def skipped_run(tmp_path_factory) -> tuple[object, Path, Path, Path]:
    """``lucid fit --data.skip_bad_images true`` on a root with a bomb: (result, root, bomb, run folder)."""
    tmp = tmp_path_factory.mktemp("bomb")
    root = _yolo_root(tmp / "data")
    bomb = write_bomb(root / "images" / "train" / "bomb.png")
    r = run_lucid(*fast_fit_args("det", root, tmp / "runs"), "--data.skip_bad_images", "true", cwd=tmp)
    return r, root, bomb, tmp / "runs" / "version_0"


@pytest.mark.slow
def test_fit_skip_bad_images_lists_the_bomb_and_trains_on_the_rest(skipped_run):
    r, _, bomb, run = skipped_run
    rows = [ln.split("\t") for ln in (run / "bad_images.txt").read_text().splitlines()] if run.is_dir() else []
    ok = (r.returncode == 0 and "8 train / 2 val images" in r.stdout and len(rows) == 1
          and rows[0][:2] == ["train", str(bomb)] and "is 900.0 megapixels" in rows[0][2]
          and (run / "checkpoints" / "last.ckpt").is_file())
    record("fit det --data.skip_bad_images", "decompression bomb", r.returncode, ok)
    assert ok, (r.stdout + r.stderr)[-3000:]


@pytest.mark.slow
def test_predict_refuses_the_bomb_as_an_unreadable_image(skipped_run, tmp_path):
    """predict stops at an image it cannot read with exit 2 naming it; a bomb is refused the same way."""
    r0, root, bomb, run = skipped_run
    assert r0.returncode == 0, r0.stderr[-3000:]
    r = run_lucid("predict", "--checkpoint", str(run / "checkpoints" / "last.ckpt"), "--source", str(bomb.parent),
                  "--img-size", "64", "--device", "cpu", "--output", str(tmp_path / "p.json"), cwd=tmp_path)
    ok = r.returncode == 2 and _names_the_bomb(r.stderr, bomb) and "Traceback" not in r.stderr
    record("predict", "decompression bomb", r.returncode, ok)
    assert ok, r.stderr[-3000:]
    assert not (tmp_path / "p.json").exists()


@pytest.mark.slow
def test_a_truncated_jpeg_found_mid_run_says_the_start_check_reads_headers_only(tmp_path):
    root = _yolo_root(tmp_path / "data")
    image = sorted((root / "images" / "train").glob("*.jpg"))[2]
    data = image.read_bytes()
    image.write_bytes(data[: len(data) // 2])  # the header reads; the pixel data stops half-way
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), cwd=tmp_path)
    err = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"Image file {image} cannot be decoded" in err
    assert "the check before training reads only each image's header" in err
    assert "`lucid data check --data-root ROOT --decode`" in err and "`--data.skip_bad_images true`" in err
    assert "Traceback" not in r.stderr
