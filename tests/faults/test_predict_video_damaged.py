"""A video with damaged packets: what decodes is predicted, with one warning naming the frames lost.

A video none of whose frames decode is an exit-2 error that leaves no empty output folder.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.cli.test_predict_video_and_files import write_clip
from tests.cli.tiny_run import write_tiny_run
from tests.conftest import run_lucid
from tests.faults.matrix import record

av = pytest.importorskip("av")

FRAMES = 30


def damage(clip, dest, packets: slice):
    """``clip`` copied to ``dest`` with the bytes of its ``packets`` (in file order) overwritten by noise."""
    data = bytearray(clip.read_bytes())
    with av.open(str(clip)) as container:
        spans = [(p.pos, p.size) for p in container.demux(container.streams.video[0]) if p.size]
    rng = np.random.default_rng(0)
    for pos, size in spans[packets]:
        data[pos : pos + size] = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    dest.write_bytes(data)
    return dest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    base = tmp_path_factory.mktemp("damaged")
    ckpt, _ = write_tiny_run(base)
    return base, ckpt, write_clip(base / "clean.mp4", frames=FRAMES)


def predict(ckpt, source, out):
    return run_lucid("predict", "--checkpoint", str(ckpt), "--source", str(source), "--conf", "0", "--device", "cpu",
                     "--save", str(out), "--batch-size", "8")


def test_damaged_packets_are_skipped_with_a_warning_naming_the_frames(tiny, tmp_path):
    _, ckpt, clean = tiny
    clip = damage(clean, tmp_path / "clip.mp4", slice(10, 13))  # three P/B frames in the middle
    out = tmp_path / "out"
    r = predict(ckpt, clip, out)
    text = " ".join(r.stderr.split())
    warned = re.search(r"warning: \S+clip\.mp4: 3 damaged packets could not be decoded \(.+?\); "
                       r"skipped frames? ([\d, -]+) of 30; the other (\d+) frames were predicted\.", text)
    rows = [json.loads(line) for line in (out / "clip.jsonl").read_text().splitlines()] if r.returncode == 0 else []
    ok = r.returncode == 0 and warned is not None and "Traceback" not in r.stderr and rows
    record("predict (video)", "corrupt input", r.returncode, ok, "damaged packets are skipped with a warning")
    assert r.returncode == 0, r.stderr[-3000:]
    assert warned, r.stderr[-3000:]
    skipped = set()
    for part in warned[1].split(", "):
        a, _, b = part.partition("-")
        skipped |= set(range(int(a), int(b or a) + 1))
    predicted = [row["frame"] for row in rows]
    assert 0 < len(skipped) < 10 and int(warned[2]) == len(predicted)
    assert sorted(skipped | set(predicted)) == list(range(FRAMES)) and not skipped & set(predicted)
    assert all(row["time"] == pytest.approx(row["frame"] / 10) for row in rows)  # a lost frame leaves a gap
    with av.open(str(out / "clip.mp4")) as written:  # the annotated video keeps the source's duration
        stream = written.streams.video[0]
        assert len(list(written.decode(stream))) == len(predicted)
        assert float(stream.duration * stream.time_base) == pytest.approx(FRAMES / 10, abs=0.11)
    assert r.stdout.splitlines()[-1].startswith(f"{len(predicted)} frames of 1 video, ")


def test_a_video_whose_every_packet_is_damaged_is_refused_and_leaves_no_folder(tiny, tmp_path):
    _, ckpt, clean = tiny
    clip = damage(clean, tmp_path / "dead.mp4", slice(None))
    out = tmp_path / "new" / "out"
    r = predict(ckpt, clip, out)
    text = " ".join(r.stderr.split())
    ok = (r.returncode == 2 and f"No frame of {clip} could be decoded" in text and "Traceback" not in r.stderr
          and not (tmp_path / "new").exists())
    record("predict (video)", "corrupt input (every frame)", r.returncode, ok, "no empty output folder is left")
    assert r.returncode == 2, r.stderr[-3000:]
    assert f"No frame of {clip} could be decoded" in text and "damaged" in text and "fix:" in text, text
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "new").exists()
