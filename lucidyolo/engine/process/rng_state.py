"""The global RNG streams (torch CPU and CUDA, numpy, Python) in every checkpoint, restored on resume.

Our own randomness is already a pure function of the run seed (sampler order
from ``(seed, epoch)``, augmentation from ``(seed, epoch, position)``, alpha
and close-mosaic from the epoch), so today nothing in a training step reads
the global streams. Anything that does (a dropout layer, a plugin's loss, a
library) would make a resumed run diverge without a word; saving the streams
at the checkpoint and putting them back before the first resumed epoch closes
that gap for good.

Stored as plain tensors and tuples so the checkpoint passes the
``weights_only`` loader (:func:`lucidyolo.engine.weights.checkpoint.assert_plain`).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback

RNG_KEY = "lucid_rng"


def capture_rng_state() -> dict[str, Any]:
    """The current global streams as plain types."""
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {"name": str(name), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put the streams of :func:`capture_rng_state` back."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class RNGStateCallback(Callback):
    """Saves the global streams with every checkpoint; on resume restores them when training starts.

    Restored at ``on_train_start``, not at load time: setting up the trainer
    after loading may still draw (a loader iterator without a generator draws
    its base seed from torch's stream), which the uninterrupted run did before
    its checkpoint was written.
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        checkpoint[RNG_KEY] = capture_rng_state()

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        self._pending = checkpoint.get(RNG_KEY)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._pending is not None:
            restore_rng_state(self._pending)
            self._pending = None
