"""Lightning callbacks: EMA, close-mosaic, results.csv + plots, atomic checkpoint IO, joining rank 0's run folder."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.plugins.io import TorchCheckpointIO

from lucidyolo.engine.loop.ema import ModelEMA
from lucidyolo.engine.run.results_csv import results_columns, write_results_row
from lucidyolo.engine.run.run_dir import RUN_DIR_ENV, RunDir
from lucidyolo.engine.weights.checkpoint import atomic_save, load_checkpoint

EMA_KEY = "lucid_ema"


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoint IO of every run.

    Saving writes a temporary file and renames it: a crash never truncates
    ``last.ckpt``. Loading (``--resume``) goes through
    :func:`lucidyolo.engine.weights.checkpoint.load_checkpoint` (``weights_only``, an
    allowlist of plain types) instead of Lightning's default loader: a crafted
    checkpoint is refused before anything in it runs, whichever path reads it.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        atomic_save(checkpoint, Path(path))

    def load_checkpoint(self, path: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return load_checkpoint(path)


class EMACallback(Callback):
    """Keeps an EMA of ``pl_module.model``, swaps it in for validation and saves it in checkpoints.

    Args:
        decay: asymptotic decay (0.9999).
        tau: ramp time constant in optimizer steps (2000), or ``"auto"``: from the run's
            optimizer steps (:func:`lucidyolo.optim.recipe.auto_ema_tau`).
    """

    def __init__(self, decay: float = 0.9999, tau: float | str = 2000.0) -> None:
        self.decay = decay
        self.tau = tau
        self.ema: ModelEMA | None = None
        self._pending: dict[str, Any] | None = None
        self._last_step = -1
        self._swapped = False

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.ema is None:
            tau = self.tau
            if tau == "auto":
                from lucidyolo.optim.recipe import auto_ema_tau

                tau = auto_ema_tau(int(trainer.estimated_stepping_batches))
            self.ema = ModelEMA(pl_module.model, decay=self.decay, tau=float(tau))
        if self._pending is not None:
            self.ema.load_state_dict(self._pending)
            self._pending = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        assert self.ema is not None
        self.ema.to(pl_module.device)
        self._last_step = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        # Once per optimizer step (gradient accumulation calls this hook more often).
        if self.ema is not None and trainer.global_step != self._last_step:
            self._last_step = trainer.global_step
            self.ema.update(pl_module.model)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.ema is not None and not self._swapped:
            self.ema.to(pl_module.device)
            self.ema.swap(pl_module.model)
            self._swapped = True

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.ema is not None and self._swapped:
            self.ema.swap(pl_module.model)
            self._swapped = False

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        if self.ema is not None:
            checkpoint[EMA_KEY] = self.ema.state_dict()

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get(EMA_KEY)
        if state is None:
            return
        if self.ema is None:
            self._pending = state
        else:
            self.ema.load_state_dict(state)


class ResultsCallback(Callback):
    """Writes one ``results.csv`` row per epoch and PNG curves at the end of fit.

    The row is written at the end of the training epoch: Lightning validates
    *inside* the epoch, before the training epoch means exist, so a row written
    at validation end would pair epoch N's validation with epoch N-1's losses.
    Validation columns are filled only when validation ran in that epoch.
    """

    def __init__(self, run_dir: Path, loss_terms: Sequence[str], metric_columns: Mapping[str, str]) -> None:
        """``metric_columns`` maps each logged epoch metric key to its column, in column order."""
        self.run_dir = Path(run_dir)
        self.loss_terms = tuple(loss_terms)
        self.metric_columns = dict(metric_columns)
        self.columns = results_columns(self.loss_terms, list(self.metric_columns.values()))
        self._validated_epoch = -1

    @property
    def csv_path(self) -> Path:
        return self.run_dir / "results.csv"

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated_epoch = trainer.current_epoch

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        m = {k: float(v) for k, v in trainer.callback_metrics.items() if getattr(v, "numel", lambda: 0)() == 1}
        validated = self._validated_epoch == trainer.current_epoch
        row: dict[str, float | int | None] = {"epoch": trainer.current_epoch}
        for term in self.loss_terms:
            for split in ("train", "val") if validated else ("train",):
                value = m.get(f"{split}/{term}_loss")
                if value is not None and math.isfinite(value):
                    row[f"{split}/{term}_loss"] = value
        if validated:
            for logged, column in self.metric_columns.items():
                if logged in m and column in self.columns:
                    row[column] = m[logged]
        if trainer.optimizers:
            for i, group in enumerate(trainer.optimizers[0].param_groups):
                if f"lr/pg{i}" in self.columns:
                    row[f"lr/pg{i}"] = float(group["lr"])
        write_results_row(self.csv_path, row, self.columns)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.is_global_zero and self.csv_path.exists():
            from lucidyolo.engine.run.plots import plot_results

            plot_results(self.csv_path, self.run_dir)


class JoinRankZeroRunDir(Callback):
    """Every rank takes rank 0's run folder once the process group exists.

    Ranks on other nodes start with a pending folder (they cannot see the
    variable rank 0 set for its local children); one broadcast at set-up gives
    them rank 0's path, so messages and resume commands name the one real folder.
    """

    def __init__(self, run: RunDir) -> None:
        self.run = run

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if trainer.world_size <= 1:
            return
        path = str(trainer.strategy.broadcast(str(self.run.path), src=0))
        if Path(path) != self.run.path:
            self.run.join(Path(path))
            os.environ[RUN_DIR_ENV] = path


class FirstStep(Callback):
    """Notes that training reached its first batch: a run that fails before it left nothing worth keeping."""

    def __init__(self) -> None:
        self.seen = False

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self.seen = True
