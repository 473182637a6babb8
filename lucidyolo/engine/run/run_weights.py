"""``weights.pt`` in the run folder: the slim weights of ``best.ckpt``, written when a fit finishes.

``best.ckpt`` and ``last.ckpt`` hold everything a resume needs (the raw and the EMA
weights, the optimizer's momentum buffers, the LR scheduler, the loop counters,
the callbacks' state and the RNG states): about three times the model's float32
size (a 2.4 M-parameter nano: 29.7 MB each). ``weights.pt`` is what
``lucid export --format weights`` writes from ``best.ckpt`` (the EMA weights, the
config, class names and dataset meta; :func:`lucidyolo.engine.weights.export.export_weights`,
called here, not repeated): about a third of a checkpoint, for ``--model.weights``,
``lucid eval`` / ``predict`` / ``export --checkpoint`` and ``Model.load``.

Only a run that finishes writes it (an interrupted or crashed ``trainer.fit`` raises
before), only global rank 0, atomically (a temporary file renamed over the target):
a resumed run that finishes writes it again from its own ``best.ckpt``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WEIGHTS_FILE = "weights.pt"


def write_run_weights(best: str | Path, run_dir: str | Path) -> dict[str, Any] | None:
    """Write ``run_dir/weights.pt`` from the checkpoint ``best``; ``None`` when ``best`` is no file.

    Returns :func:`~lucidyolo.engine.weights.export.export_weights`'s summary (``weights``, ``bytes``,
    ``checkpoint_bytes`` ...).
    """
    from lucidyolo.engine.weights.export import export_weights

    source = Path(best)
    if not source.is_file():
        return None
    return export_weights(source, Path(run_dir) / WEIGHTS_FILE)


def weights_note(written: dict[str, Any] | None) -> str:
    """The end of the ``done:`` line naming ``weights.pt`` (empty when none was written)."""
    if not written:
        return ""
    mb = written["bytes"] / 1e6
    return f"; slim weights {written['weights']} ({mb:.1f} MB, for eval / predict / export / --model.weights)"
