"""The progress line a piped run prints within an epoch: its numbers and its interval."""

from __future__ import annotations

import math

from lucidyolo.engine.run.epoch_lines import (
    PROGRESS_ENV,
    PROGRESS_EVERY_S,
    progress_every_s,
    progress_line,
)


def test_the_line_counts_batches_rate_and_time_left():
    # 10 of 40 batches, 160 images in 8 s: 20 img/s, 0.8 s a batch, 30 batches left = 24 s
    assert progress_line("epoch 1/3", 10, 40, 160, 8.0) == (
        "progress: epoch 1/3, batch 10/40 | 20.0 img/s | ~0:24 left in the epoch"
    )
    assert progress_line("validation of epoch 2", 3, 4, 48, 6.0, scope="validation") == (
        "progress: validation of epoch 2, batch 3/4 | 8.0 img/s | ~0:02 left in the validation"
    )


def test_an_unknown_length_gives_no_estimate():
    assert (
        progress_line("epoch 1/3", 5, math.inf, 80, 4.0)
        == "progress: epoch 1/3, batch 5/? | 20.0 img/s"
    )


def test_the_interval_is_at_most_a_minute_and_the_environment_can_change_it(monkeypatch):
    assert 0 < PROGRESS_EVERY_S <= 60  # the issue: a line at least every minute
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert progress_every_s() == PROGRESS_EVERY_S
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert progress_every_s() == 0.0
    for bad in ("soon", "-1"):
        monkeypatch.setenv(PROGRESS_ENV, bad)
        assert progress_every_s() == PROGRESS_EVERY_S
