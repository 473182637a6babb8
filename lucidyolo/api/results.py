"""What ``Model.fit``, ``Model.evaluate`` and ``Model.export`` return: small typed views of the engine's dicts."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


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


# Stat names of the two protocols the built-in tasks report: pycocotools' (``AP``...) and the
# rotated-box mAP (``mAP50-95``...); the first present is read.
_MAP = ("AP", "mAP50-95")
_MAP50 = ("AP50", "mAP50")
_MAP75 = ("AP75", "mAP75")


@dataclass(frozen=True)
class MetricFamily:
    """One kind of result of one decode path (``bbox``, ``segm``...): its mAP numbers under familiar names.

    Attributes:
        kind: the result kind in the report (``"bbox"``).
        path: the decode path scored (``"e2e"``).
        stats: every headline stat of the kind, by the protocol's names (``AP``, ``AP50``, ``APs``...).
        per_class: the protocol's per-class rows (``name``, ``ap``, ``ap50``...).
        names: the model's classes in label order (what :attr:`maps` is indexed by).
    """

    kind: str
    path: str
    stats: dict[str, float]
    per_class: list[dict[str, Any]]
    names: list[str]

    def _stat(self, names: tuple[str, ...]) -> float:
        for name in names:
            if name in self.stats:
                return float(self.stats[name])
        return math.nan

    @property
    def map(self) -> float:
        """mAP over IoU 0.50:0.95 (NaN when the protocol does not report it)."""
        return self._stat(_MAP)

    @property
    def map50(self) -> float:
        """mAP at IoU 0.50."""
        return self._stat(_MAP50)

    @property
    def map75(self) -> float:
        """mAP at IoU 0.75."""
        return self._stat(_MAP75)

    def _per_class(self, key: str) -> np.ndarray:
        import numpy as np

        names = self.names or [str(row.get("name", i)) for i, row in enumerate(self.per_class)]
        out = np.full(len(names), np.nan)
        index = {name: i for i, name in enumerate(names)}
        for row in self.per_class:
            i = index.get(str(row.get("name")))
            value = row.get(key)
            # -1 is pycocotools' "no ground truth of this class": not a score
            if i is not None and isinstance(value, int | float) and value >= 0:
                out[i] = float(value)
        return out

    @property
    def maps(self) -> np.ndarray:
        """``(C,)`` float64 AP over IoU 0.50:0.95 per class, indexed by label; NaN for a class without
        ground truth in the split."""
        return self._per_class("ap")

    @property
    def maps50(self) -> np.ndarray:
        """``(C,)`` float64 AP at IoU 0.50 per class, indexed by label (NaN as :attr:`maps`)."""
        return self._per_class("ap50")


@dataclass(frozen=True)
class EvalReport:
    """``lucid eval``'s report: the task's protocol on one split, for every decode path.

    ``report`` is the whole JSON-able dict ``lucid eval --output`` writes
    (``task``, ``checkpoint``, ``img_size``, ``paths``, ``timings``, versions, config).

    The task's metric families (its spec's ``metrics.families``) are attributes of the default decode
    path: ``report.box.map`` (mAP50-95), ``.map50``, ``.map75``, ``.maps`` (per class) for every task with
    boxes, ``report.seg`` / ``report.mask``, ``report.pose`` / ``report.keypoints``, ``report.obb`` where the
    task reports them; :meth:`family` reads any kind of any path.
    """

    report: dict[str, Any]
    families: dict[str, str] = field(default_factory=dict)
    """``{attribute: result kind}``, from the task's ``MetricSpec.families``."""
    names: list[str] = field(default_factory=list)
    """The model's classes in label order (indexes :attr:`MetricFamily.maps`)."""

    def family(self, kind: str, path: str | None = None) -> MetricFamily:
        """The ``kind`` results (``"bbox"``, or an attribute name of :attr:`families`) of decode ``path``
        (default: :attr:`default_path`).

        Raises:
            KeyError: the path did not score that kind (the message lists what it scored).
        """
        path = path or self.default_path
        kind = self.families.get(kind, kind)
        by_kind = self.report["paths"][path]
        if kind not in by_kind:
            raise KeyError(f"decode path {path!r} scored {sorted(by_kind)}, not {kind!r}")
        result = by_kind[kind]
        return MetricFamily(kind=kind, path=path, stats=dict(result.get("stats", {})),
                            per_class=[dict(r) for r in result.get("per_class", [])], names=list(self.names))

    def __getattr__(self, name: str) -> MetricFamily:
        # only reached when normal lookup fails: a family the task declares (`report.box`)
        if name.startswith("_") or name in ("report", "families", "names"):
            raise AttributeError(name)
        if name not in self.families:
            declared = ", ".join(sorted(self.families)) or "none (use report.family(kind))"
            raise AttributeError(f"EvalReport has no attribute {name!r}; this task's metric families: {declared}")
        try:
            return self.family(name)
        except KeyError as err:
            raise AttributeError(f"report.{name}: {err.args[0]}") from None

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
