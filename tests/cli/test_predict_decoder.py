"""`lucid predict --decoder` takes the checkpoint's task's decode paths; none given: the task's first."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_run(tmp_path_factory.mktemp("tinydet"))


def test_an_unknown_decoder_exits_2_naming_the_tasks_paths(tiny, lucid):
    ckpt, root = tiny
    r = lucid("predict", "--checkpoint", str(ckpt), "--source", str(root / "val"), "--device", "cpu", "--decoder", "nmx")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "--decoder 'nmx' is not a decode path of task 'det'" in r.stderr
    assert "e2e, nms" in r.stderr and "--decoder e2e or --decoder nms" in r.stderr


@pytest.mark.parametrize(("args", "used"), [((), "e2e"), (("--decoder", "nms"), "nms")])
def test_the_default_decoder_is_the_tasks_first_path(args, used, tiny, lucid):
    ckpt, root = tiny
    r = lucid("predict", "--checkpoint", str(ckpt), "--source", str(root / "val"), "--device", "cpu", "--conf", "1", *args)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"({used}, conf >= 1)" in r.stdout.strip().splitlines()[-1]


def test_python_api_decoder_defaults_and_refusal(tiny):
    from lucidyolo import Model
    from lucidyolo.errors import UserError

    model = Model.load(tiny[0])
    image = np.zeros((64, 80, 3), np.uint8)
    (default,) = model.predict(image, device="cpu", conf=0.0)
    (e2e,) = model.predict(image, device="cpu", conf=0.0, decoder="e2e")
    assert np.array_equal(default.scores.numpy(), e2e.scores.numpy())
    with pytest.raises(UserError, match="not a decode path of task 'det'"):
        model.predict(image, device="cpu", decoder="top1")
