"""`lucid predict` output through the real console script: one whole line per detection, then a summary line."""

from __future__ import annotations

import json

import pytest

from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    base = tmp_path_factory.mktemp("predict")
    ckpt, root = write_tiny_run(base)
    return base, ckpt, root


def test_one_unwrapped_line_per_detection_and_a_summary_at_40_columns(tiny, lucid):
    base, ckpt, root = tiny
    out = base / "deep" / "folder" / "predictions.json"  # a long path: every line is wider than 40 columns
    r = lucid("predict", "--checkpoint", str(ckpt), "--source", str(root / "val"), "--conf", "0", "--device", "cpu",
              "--output", str(out), env={"COLUMNS": "40"})
    assert r.returncode == 0, r.stderr[-3000:]
    pred = json.loads(out.read_text())
    lines = r.stdout.splitlines()
    expected = [(im["image"], p) for im in pred["images"] for p in im["predictions"]]
    assert len(expected) > 0 and len(lines) == len(expected) + 1  # nothing else, no wrapped fragments
    for line, (image, p) in zip(lines, expected, strict=False):
        assert len(line) > 40
        assert line.startswith(f"{image}: {p['name']} {p['score']:.3f} box=")
        assert line.endswith(json.dumps(p["box"], separators=(",", ":")))
    images = len(pred["images"])
    assert lines[-1] == (f"{images} image{'s' * (images != 1)}, {len(expected)} detections (e2e, conf >= 0); "
                         f"JSON in {out}.")


def test_the_summary_line_comes_even_when_nothing_is_found(tiny, lucid):
    base, ckpt, root = tiny
    drawn = base / "drawn"
    r = lucid("predict", "--checkpoint", str(ckpt), "--source", str(root / "val"), "--conf", "1", "--device", "cpu",
              "--save", str(drawn), env={"COLUMNS": "40"})
    assert r.returncode == 0, r.stderr[-3000:]
    images = len(list((root / "val").glob("*.jpg")))
    assert len(list(drawn.glob("*.jpg"))) == images  # the annotated folder is written, empty or not
    (line,) = r.stdout.splitlines()
    assert line.startswith(f"{images} image{'s' * (images != 1)}, 0 detections (e2e, conf >= 1); "
                           f"annotated images in {drawn}; nothing reached the threshold")
