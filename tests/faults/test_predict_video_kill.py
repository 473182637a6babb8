"""A video predict killed by SIGKILL leaves its temporary files; the next predict of the same outputs removes them.

Removal is limited to the names the rerun writes, and to files no live process is writing (a writer
holds its temporary file under a lock until the rename: docs/DECISIONS.md).
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.cli.test_predict_video_and_files import write_clip
from tests.cli.tiny_run import write_tiny_run
from tests.conftest import run_lucid
from tests.faults.matrix import interrupt, record

pytest.importorskip("av")


def test_a_rerun_removes_the_temporaries_of_a_killed_video_predict(tmp_path):
    from lucidyolo.atomic_write import atomic_open

    ckpt, _ = write_tiny_run(tmp_path)
    clip = write_clip(tmp_path / "clip.mp4", frames=600)
    out = tmp_path / "out"
    args = ("predict", "--checkpoint", str(ckpt), "--source", str(clip), "--conf", "0", "--device", "cpu",
            "--save", str(out), "--batch-size", "4")

    def writing(_proc) -> bool:  # both temporaries exist: frames are being encoded and their lines written
        return any(out.glob(".clip.mp4.*.tmp")) and any(out.glob(".clip.jsonl.*.tmp"))

    rc, _, _ = interrupt(args, signal.SIGKILL, writing, tmp_path)
    assert rc == -signal.SIGKILL
    left = sorted(p.name for p in out.glob(".*.tmp"))
    assert len(left) == 2, left  # what the issue is about: nothing could remove them

    write_clip(clip, frames=6)  # the same stem, shorter: the rerun is quick
    decoy = out / ".other.mp4.0123456789ab.tmp"  # another video's leftover: not this run's to judge
    decoy.write_bytes(b"x" * 1000)
    with atomic_open(out / "clip.mp4", "wb") as live:  # a live writer of the same name: its lock keeps its file
        live.write(b"live")
        (live_tmp,) = (p for p in out.glob(".clip.mp4.*.tmp") if p.name not in left)
        r = run_lucid(*args)
        rows = [json.loads(line) for line in (out / "clip.jsonl").read_text().splitlines()] if r.returncode == 0 else []
        gone = not any((out / name).exists() for name in left)
        ok = r.returncode == 0 and gone and "Removed 2 temporary files" in r.stderr and len(rows) == 6
        record("predict (video)", "SIGKILL, then rerun", r.returncode, ok, "the rerun removes the dead run's temporaries")
        assert r.returncode == 0, r.stderr[-3000:]
        assert gone, sorted(p.name for p in out.iterdir())
        line = " ".join(r.stderr.split())
        assert "Removed 2 temporary files (" in line and f"MB) left in {out} by an earlier predict" in line, line
        assert [row["frame"] for row in rows] == list(range(6))
        assert decoy.exists() and live_tmp.exists()
    assert (out / "clip.mp4").read_bytes() == b"live"  # the live writer's rename still worked
    assert sorted(p.name for p in out.glob(".*.tmp")) == [decoy.name]
