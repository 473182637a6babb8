"""Lightning's loggers as the run folder wants them: ``metrics.csv`` whole or absent, no ``hparams.yaml``.

Lightning's ``CSVLogger`` appends to ``metrics.csv`` in place and rewrites it in
place when a new column appears, so a kill at the wrong moment leaves a truncated
file; it also deletes the file of a resumed run. Here the whole (small) file is
rewritten through :func:`lucidyolo.atomic_write.atomic_open` at each of Lightning's
flushes, and a resumed run keeps the rows of the epochs its checkpoint holds.

``hparams.yaml`` is not written by either logger: lucid saves no Lightning
hyperparameters (the config travels in the checkpoint and in ``config.yaml``), so
the file only ever held ``{}``. TensorBoard's event file is an append-only record
stream and stays Lightning's (see docs/DECISIONS.md).
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger
from pytorch_lightning.loggers.logger import rank_zero_experiment
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from lucidyolo.atomic_write import atomic_open

METRICS_FILE = "metrics.csv"


class MetricsWriter:
    """What ``CSVLogger.experiment`` is to Lightning: collects logged rows, writes ``metrics.csv`` atomically."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.metrics_file_path = os.path.join(log_dir, METRICS_FILE)
        self.metrics: list[dict[str, Any]] = []  # logged since the last save (Lightning's name)
        self._rows: list[dict[str, Any]] = []
        self._earlier = _read_rows(Path(self.metrics_file_path))  # a resumed run's rows, until the first save
        self.hparams: dict[str, Any] = {}
        Path(log_dir).mkdir(parents=True, exist_ok=True)

    def log_hparams(self, params: dict[str, Any]) -> None:
        """Kept in memory only (lucid logs none; see the module docstring)."""
        self.hparams.update(params)

    def log_metrics(self, metrics_dict: dict[str, Any], step: int | None = None) -> None:
        row = {k: v.item() if hasattr(v, "item") else v for k, v in metrics_dict.items()}
        row["step"] = len(self._rows) + len(self.metrics) if step is None else step
        self.metrics.append(row)

    def save(self) -> None:
        """Rewrite ``metrics.csv`` with every row so far (a temporary file renamed over it)."""
        if not self.metrics:
            return
        if self._earlier is not None:
            # a resume re-runs the epoch that was interrupted: drop what the killed run logged from it on
            first = min((_epoch(r) for r in self.metrics), default=math.inf)
            self._rows = [r for r in self._earlier if _epoch(r) < first]
            self._earlier = None
        self._rows += self.metrics
        self.metrics = []
        keys = sorted(set().union(*self._rows))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self._rows)
        with atomic_open(self.metrics_file_path, "w", encoding="utf-8", newline="") as f:
            f.write(buf.getvalue())


def _epoch(row: dict[str, Any]) -> float:
    try:
        return float(row.get("epoch", math.inf))
    except (TypeError, ValueError):
        return math.inf


def _read_rows(path: Path) -> list[dict[str, Any]] | None:
    """The rows of an existing ``metrics.csv`` (empty cells left out), or ``None`` without one."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return [{k: v for k, v in r.items() if k is not None and v not in ("", None)} for r in csv.DictReader(f)]
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, csv.Error):
        return None  # unreadable: start it again, as Lightning did


class RunCSVLogger(CSVLogger):
    """Lightning's ``CSVLogger`` writing ``metrics.csv`` atomically and no ``hparams.yaml``."""

    @property
    @rank_zero_experiment
    def experiment(self) -> MetricsWriter:  # type: ignore[override]
        if self._experiment is None:
            self._experiment = MetricsWriter(self.log_dir)
        return self._experiment

    def log_hyperparams(self, params: Any = None, *args: Any, **kwargs: Any) -> None:
        """Nothing to write: lucid logs no Lightning hyperparameters (its config is ``config.yaml``)."""


class RunTensorBoardLogger(TensorBoardLogger):
    """Lightning's ``TensorBoardLogger`` without the ``hparams.yaml`` its ``save`` writes in place."""

    @rank_zero_only
    def save(self) -> None:
        self.experiment.flush()
