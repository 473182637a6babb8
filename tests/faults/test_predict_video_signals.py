"""A video predict stopped by SIGINT / SIGTERM while its MP4 is being written leaves no partial video behind."""

from __future__ import annotations

import signal

import pytest

from tests.cli.test_predict_video_and_files import write_clip
from tests.cli.tiny_run import write_tiny_run
from tests.faults.matrix import EXIT, MESSAGE, check_ending, interrupt

pytest.importorskip("av")


@pytest.mark.parametrize("sig", (signal.SIGINT, signal.SIGTERM), ids=["SIGINT", "SIGTERM"])
def test_a_stopped_video_predict_leaves_no_partial_video(sig, tmp_path):
    ckpt, _ = write_tiny_run(tmp_path)
    clip = write_clip(tmp_path / "clip.mp4", frames=600)
    out = tmp_path / "out"
    args = ("predict", "--checkpoint", str(ckpt), "--source", str(clip), "--conf", "0", "--device", "cpu",
            "--save", str(out), "--batch-size", "4")

    def writing(_proc) -> bool:  # the temporary MP4 exists: frames are being encoded
        return any(out.glob(".clip.mp4.*.tmp"))

    rc, _, err = interrupt(args, sig, writing, tmp_path)
    check_ending("predict (video)", sig.name, rc, err, EXIT[sig], MESSAGE[sig])
    assert not (out / "clip.mp4").exists() and not (out / "clip.jsonl").exists()
    assert not list(out.glob(".*.tmp"))  # the temporary files are removed
