"""``lucid gate overfit``: a minutes-long check that a task's whole path can overfit a small slice.

Reader, augmentation, transport, head, assigner, loss, optimizer, deployed
decode and metric all run for real on a synthetic slice; the metric is read on
the training slice itself. A task that cannot overfit a handful of images will
not converge on a real set.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucidyolo.errors import NotAvailableError


@dataclass(frozen=True)
class GateSpec:
    """Recipe and floor of one task's gate."""

    preset: str
    metric: str
    floor: float
    images: int = 100
    img_size: int = 320
    epochs: int = 50
    conf: float = 0.25


GATES: dict[str, GateSpec] = {
    "det": GateSpec(preset="det_nano_overfit.yaml", metric="recall@0.5 (train slice, e2e, conf>=0.25)", floor=0.95),
}


def deployed_recall(model: Any, source: Any, img_size: int, conf: float, batch_size: int = 16) -> float:
    """Recall at IoU 0.5 of the deployed end-to-end graph on ``source`` (network-input frame)."""
    import torch

    from lucidyolo.data.datasets import ValDataset
    from lucidyolo.data.loader import build_val_loader
    from lucidyolo.metrics.recall import RecallAtIoU
    from lucidyolo.models.deploy import make_deploy_model
    from lucidyolo.structures.packed import unpack

    deployed = make_deploy_model(model)
    loader = build_val_loader(ValDataset(source, img_size), batch_size, "det", val_num_workers=0)
    recall = RecallAtIoU(0.5)
    with torch.inference_mode():
        for batch in loader:
            images, gt, _ = unpack(batch, "cpu")
            dets = deployed(images)  # (B, 300, 6)
            dets = torch.where((dets[..., 4:5] >= conf), dets, torch.zeros_like(dets))
            recall.update(dets, gt["boxes"], gt["labels"], gt["mask"])
    return recall.compute()  # NaN without ground truth: fails every floor


def run_overfit_gate(
    task: str, epochs: int | None = None, images: int | None = None, img_size: int | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Train on the slice and score it; returns metric, floor, passed, wall time."""
    from lucidyolo.config.resolve import resolve_config
    from lucidyolo.engine.build import open_split
    from lucidyolo.engine.fit import run_fit
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    gate = GATES.get(spec.name)
    if gate is None or spec.make_synthetic is None:
        raise NotAvailableError(
            f"`lucid gate overfit --task {spec.name}` is not available yet.",
            why=f"the {spec.name} task's training path is not built yet (see the README status table).",
            fix="Nothing was run.",
        )
    t0 = time.perf_counter()
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"lucid-gate-{spec.name}-"))
    n, size, e = images or gate.images, img_size or gate.img_size, epochs or gate.epochs
    root = spec.make_synthetic(work / "data", n, size, 0)
    cfg = resolve_config(
        spec, [gate.preset],
        {"data": {"img_size": size, "val_split": "train"},
         "trainer": {"max_epochs": e, "default_root_dir": str(work / "runs"), "check_val_every_n_epoch": e}},
        data_root=root,
    )
    result = run_fit(spec, cfg)
    source = open_split(spec, cfg, root, "train", "train")
    value = deployed_recall(result["system"].model.cpu(), source, size, gate.conf)
    wall = time.perf_counter() - t0
    return {
        "task": spec.name, "metric": gate.metric, "value": value, "floor": gate.floor,
        "passed": value >= gate.floor, "wall_s": wall, "epochs": e, "images": len(source), "img_size": size,
        "run_dir": str(result["run_dir"]),
    }
