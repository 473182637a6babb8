"""`--resume` reads checkpoints only through the safe loader; determinism warns where kernels may lack it."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from lucidyolo.errors import UserError


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _crafted(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "pwned"
    bad = tmp_path / "checkpoints" / "last.ckpt"
    bad.parent.mkdir()
    with open(bad, "wb") as f:
        pickle.dump({"state_dict": {}, "lucid": {"config": {"model": {"task": "det"}}}, "x": _Payload(marker)}, f)
    return bad, marker


def test_lightnings_resume_path_reads_through_the_safe_loader(tmp_path):
    from lucidyolo.engine.loop.callbacks import AtomicCheckpointIO

    bad, marker = _crafted(tmp_path)
    with pytest.raises(UserError):
        AtomicCheckpointIO().load_checkpoint(bad, map_location="cpu")  # what Trainer.fit(ckpt_path=...) calls
    assert not marker.exists()


def test_resume_refuses_a_crafted_checkpoint_before_it_runs(tmp_path, lucid):
    bad, marker = _crafted(tmp_path)
    r = lucid("fit", "det", "--resume", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize(("requested", "cuda", "mps", "expected"), [
    (True, False, False, True), (True, True, False, "warn"), (True, False, True, "warn"), (False, True, True, False),
])
def test_determinism_is_strict_on_cpu_and_warns_on_cuda_and_mps(requested, cuda, mps, expected):
    from lucidyolo.engine.loop.trainer_factory import determinism

    assert determinism(requested, cuda, mps) == expected
