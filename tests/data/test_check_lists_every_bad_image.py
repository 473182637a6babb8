"""`lucid data check` names every bad image of a split, not only the first; `scan_bad_images` is the list."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lucidyolo.data.check import scan_bad_images
from lucidyolo.data.layouts import open_source
from tests.task_fields import fields_of

from .conftest import run_data_cli


def _root_with_bad_images(synth, tmp_path: Path, damage) -> tuple[Path, list[Path]]:
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=8, size=32), root)
    bad = sorted((root / "images" / "train").iterdir())[1:4]
    for p in bad:
        damage(p)
    return root, bad


def _cut_tail(p: Path) -> None:
    data = p.read_bytes()
    assert data.endswith(b"\xff\xd9")
    p.write_bytes(data[:-2])  # the header still reads; the end-of-image marker is gone


def _not_an_image(p: Path) -> None:
    p.write_text("not an image")


def _check(root: Path, *extra: str) -> tuple[int, str]:
    r = run_data_cli("check", "--data-root", str(root), *extra)
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    return r.returncode, " ".join(out.split())


def test_three_truncated_images_are_all_named(synth, tmp_path):
    root, bad = _root_with_bad_images(synth, tmp_path, _cut_tail)
    code, out = _check(root)
    assert code == 2
    assert "3 bad image file(s) (train)" in out
    for p in bad:
        assert f"{p}: is truncated (no end-of-image marker)" in out
    rep = json.loads(run_data_cli("check", "--data-root", str(root), "--json").stdout)
    train = rep["splits"][0]
    assert not rep["ok"] and train["error"]
    assert train["bad_images"] == [f"{p}: is truncated (no end-of-image marker)" for p in bad]


def test_three_unreadable_images_are_all_named(synth, tmp_path):
    # the YOLO reader opens every header itself; it reads on and names all three
    root, bad = _root_with_bad_images(synth, tmp_path, _not_an_image)
    code, out = _check(root)
    assert code == 2 and "3 bad image file(s) (train)" in out
    for p in bad:
        assert f"{p}: is not a readable image" in out
    train = json.loads(run_data_cli("check", "--data-root", str(root), "--json").stdout)["splits"][0]
    assert [b.split(": ")[0] for b in train["bad_images"]] == [str(p) for p in bad]


def test_scan_bad_images_returns_every_path_and_reason(synth, tmp_path):
    root, bad = _root_with_bad_images(synth, tmp_path, _cut_tail)
    src = open_source(root, "train", fields_of("det"))
    found = scan_bad_images(src, decode=False)
    assert found == [(p, "is truncated (no end-of-image marker)") for p in bad]
    assert scan_bad_images(open_source(root, "val", fields_of("det")), decode=True) == []
