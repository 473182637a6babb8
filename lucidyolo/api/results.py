"""What ``Model.fit``, ``Model.evaluate`` and ``Model.export`` return: small typed views of the engine's dicts."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FitResult:
    """One finished training run.

    Attributes:
        run_dir: the run folder (``config.yaml``, ``results.csv``, ``checkpoints/``).
        best: the checkpoint the run's primary metric picked (``checkpoints/best.ckpt``;
            ``last.ckpt`` when no validation ran).
        metrics: the last logged scalar of every metric and loss (``"val/mAP50-95"``, ...).
        transfer: ``transfer.json``'s content (which tensors and classes came from
            ``model.weights``) when the run started from weights, else None.
        config: the resolved run config, as ``config.yaml`` holds it (JSON-able dict).
    """

    run_dir: Path
    best: Path
    metrics: dict[str, float]
    transfer: dict[str, Any] | None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalReport:
    """``lucid eval``'s report: the task's protocol on one split, for every decode path.

    ``report`` is the whole JSON-able dict ``lucid eval --output`` writes
    (``task``, ``checkpoint``, ``img_size``, ``paths``, ``timings``, versions, config).
    """

    report: dict[str, Any]

    @property
    def task(self) -> str:
        return str(self.report["task"])

    @property
    def img_size(self) -> int:
        return int(self.report["img_size"])

    @property
    def paths(self) -> dict[str, dict[str, Any]]:
        """``{decode path: {iou type: {"stats": {...}, ...}}}``, e.g. ``paths["e2e"]["bbox"]["stats"]["AP"]``."""
        return dict(self.report["paths"])

    @property
    def default_path(self) -> str:
        """The task's default decode path (the first of its ``decode_paths``), else the report's first path."""
        path = self.report.get("default_path")
        return str(path) if path in self.report["paths"] else next(iter(self.report["paths"]))

    @property
    def stats(self) -> dict[str, float]:
        """The headline stats: the task's default decode path, its first IoU type (``bbox``, ``classification``...)."""
        return self.stats_of(self.default_path)

    def stats_of(self, path: str, iou_type: str | None = None) -> dict[str, float]:
        """The stats dict of one decode ``path`` and ``iou_type`` (default: the path's first)."""
        by_type = self.report["paths"][path]
        result = by_type[iou_type if iou_type is not None else next(iter(by_type))]
        return dict(result.get("stats", {}))

    @property
    def metrics(self) -> dict[str, float]:
        """Every scalar stat flattened: ``{"e2e/bbox/AP": 0.41, "nms/bbox/AP50": 0.63, ...}``."""
        return {
            f"{path}/{iou_type}/{name}": float(value)
            for path, by_type in self.report["paths"].items()
            for iou_type, result in by_type.items()
            for name, value in result.get("stats", {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool)
        }

    def to_json(self) -> dict[str, Any]:
        """The report dict (a copy), ready for ``json.dumps``."""
        return copy.deepcopy(self.report)


@dataclass(frozen=True)
class ExportResult:
    """A written export.

    Attributes:
        path: the ONNX or weights file.
        format: ``"onnx"`` or ``"weights"``.
        details: ``lucid export``'s summary (``img_size``, ``outputs``, ``bytes``, ``parity`` when
            checked for ONNX; ``bytes``, ``stored``, ``half``... for weights).
    """

    path: Path
    format: str
    details: dict[str, Any]
