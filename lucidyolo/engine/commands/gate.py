"""``lucid gate overfit``: a minutes-long check that a task's whole path can overfit a small slice.

Reader, augmentation, transport, head, assigner, loss, optimizer, deployed
decode and metric all run for real on a synthetic slice; the metric is read on
the training slice itself. A task that cannot overfit a handful of images will
not converge on a real set.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lucidyolo.errors import NotAvailableError, RunInterrupted


def run_overfit_gate(
    task: str, epochs: int | None = None, images: int | None = None, img_size: int | None = None,
    workdir: Path | None = None, log: Callable[[str], None] | None = None, progress_bar: bool = False,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train on the slice and score it; returns metric, floor, passed, wall time.

    ``overrides`` (nested config dict) change the gate recipe for an ablation; the
    slice, its size, the epochs and the run directory stay the gate's.
    """
    from lucidyolo.config.overrides import deep_merge
    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.engine.loop.build import open_split
    from lucidyolo.engine.loop.fit import run_fit
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    gate = spec.gate
    if gate is None or spec.make_synthetic is None or not spec.trainable:
        raise NotAvailableError(
            f"`lucid gate overfit --task {spec.name}` is not available.",
            why=f"the {spec.name} task's plugin declares no gate (GateSpec), no synthetic set or no training hooks.",
            fix="Nothing was run.",
        )
    t0 = time.perf_counter()
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"lucid-gate-{spec.name}-"))
    n, size, e = images or gate.images, img_size or gate.img_size, epochs or gate.epochs
    root = spec.make_synthetic(work / "data", n, size, 0)
    fixed = {"data": {"img_size": size, "val_split": "train"},
             "trainer": {"max_epochs": e, "default_root_dir": str(work / "runs"), "check_val_every_n_epoch": e}}
    cfg = resolve_config(spec, [gate.preset], deep_merge(overrides or {}, fixed), data_root=root, get_task=get_task)
    try:
        result = run_fit(spec, cfg, log=log, progress_bar=progress_bar)
    except RunInterrupted as stop:
        done = "no epoch" if not stop.epochs_done else f"{stop.epochs_done} of {e} epochs"
        stop.resume = None
        stop.fix = (f"{done} had finished, but a gate is scored only at its end and is not resumed: run "
                    f"`lucid gate overfit --task {spec.name}` again.")
        raise
    source = open_split(spec, cfg, root, "train", "train")
    value = float(gate.score(model=result["system"].model.cpu(), source=source, img_size=size, conf=gate.conf,
                             cfg=cfg.model))
    wall = time.perf_counter() - t0
    return {
        "task": spec.name, "metric": gate.metric, "value": value, "floor": gate.floor,
        "passed": bool(value >= gate.floor), "wall_s": wall, "epochs": e, "images": len(source), "img_size": size,
        "run_dir": str(result["run_dir"]), "overrides": overrides or {},
    }
