"""The global RNG streams travel in the checkpoint and come back when a resumed run starts training."""

from __future__ import annotations

import io
import random

import numpy as np
import torch

from lucidyolo.engine.process.rng_state import RNG_KEY, RNGStateCallback
from lucidyolo.engine.weights.checkpoint import assert_plain


def _draws():
    return torch.rand(4).tolist(), np.random.rand(4).tolist(), np.random.normal(), random.random()


def test_streams_saved_with_a_checkpoint_are_restored_at_train_start():
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    np.random.normal()  # leaves a cached Gaussian in numpy's legacy state
    saver = RNGStateCallback()
    checkpoint: dict = {}
    saver.on_save_checkpoint(None, None, checkpoint)
    expected = _draws()
    assert_plain(checkpoint[RNG_KEY], RNG_KEY)
    buf = io.BytesIO()
    torch.save(checkpoint, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)  # passes the safe loader every command uses

    torch.manual_seed(7), np.random.seed(7), random.seed(7)  # a new process: other streams
    resumed = RNGStateCallback()
    resumed.on_load_checkpoint(None, None, loaded)
    assert _draws() != expected  # loading alone changes nothing ...
    resumed.on_train_start(None, None)
    assert _draws() == expected  # ... training starts where the saved run stood
    resumed.on_train_start(None, None)  # only once
    assert _draws() != expected
