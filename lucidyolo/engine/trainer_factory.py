"""The Lightning ``Trainer`` of a run: loggers, checkpoint callbacks, the engine's callbacks, determinism."""

from __future__ import annotations

from typing import Any

from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.run_dir import RunDir
from lucidyolo.tasks.api import TaskSpec


def uses_cuda(cfg: RunConfig) -> bool:
    import torch

    acc = cfg.trainer.accelerator.lower()
    return acc in ("gpu", "cuda") or (acc == "auto" and torch.cuda.is_available())


def uses_mps(cfg: RunConfig) -> bool:
    import torch

    acc = cfg.trainer.accelerator.lower()
    mps = getattr(torch.backends, "mps", None)
    available = bool(mps is not None and mps.is_available())
    return acc == "mps" or (acc == "auto" and not torch.cuda.is_available() and available)


def bf16_hint(cfg: RunConfig) -> str | None:
    """A line suggesting ``bf16-mixed`` when a float32 CPU step runs on a CPU with AMX bfloat16 units, else ``None``.

    Not applied by itself: bfloat16 changes the numbers, so gates and presets stay float32 and
    the user chooses (on one AMX machine the shapes benchmark trained 1.30x faster, docs/DECISIONS.md).
    """
    import torch

    acc = cfg.trainer.accelerator.lower()
    if str(cfg.trainer.precision) not in ("32-true", "32") or uses_cuda(cfg) or uses_mps(cfg) or acc not in ("auto", "cpu"):
        return None
    from lucidyolo.optim.musgd import native_bf16_matmul

    if not native_bf16_matmul(torch.device("cpu")):
        return None
    line = ("this CPU has AMX bfloat16 units: `--trainer.precision bf16-mixed` runs the training step in "
            "bfloat16 (about 1.3x faster on the shapes benchmark; the numbers change, so it is not the default)")
    if cfg.model.optimizer == "musgd" and cfg.model.newton_schulz_dtype == "float32":
        line += ("; `--model.newton_schulz_dtype auto` puts only MuSGD's orthogonalisation in bfloat16 "
                 "(about 3% faster)")
    return line


def determinism(requested: bool, cuda: bool, mps: bool) -> bool | str:
    """Lightning's ``deterministic``: strict on the CPU; ``"warn"`` on CUDA and MPS, where some kernels have
    no deterministic version and strict mode would stop the run instead of warning."""
    if not requested:
        return False
    return "warn" if cuda or mps else True


def make_trainer(
    spec: TaskSpec, cfg: RunConfig, run: RunDir, *, cuda: bool, progress_bar: bool = False,
    extra_callbacks: list[Any] | None = None, epoch_log: Any = None,
) -> tuple[Any, Any]:
    """The trainer and its ``best.ckpt`` callback (monitoring the task's primary metric).

    ``epoch_log(line)``, when given and there is no progress bar, receives one line per epoch.
    """
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint, RichProgressBar
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

    from lucidyolo.engine.callbacks import AtomicCheckpointIO, EMACallback, ResultsCallback
    from lucidyolo.engine.interrupt import StopLoadersOnException
    from lucidyolo.engine.rng_state import RNGStateCallback

    tb = TensorBoardLogger(save_dir=str(run.root), name="", version=run.version, default_hp_metric=False)
    csv = CSVLogger(save_dir=str(run.root), name="", version=run.version)
    checkpoint_cb = ModelCheckpoint(
        dirpath=run.path / "checkpoints", filename="best", monitor=spec.metrics.monitor, mode="max",
        save_top_k=1, enable_version_counter=False, auto_insert_metric_name=False,
    )
    # A separate unmonitored callback writes last.ckpt every epoch: Lightning's save_last only
    # writes when the monitored checkpoint was written in the same step.
    last_cb = ModelCheckpoint(
        dirpath=run.path / "checkpoints", filename="last", monitor=None, save_top_k=1,
        enable_version_counter=False, auto_insert_metric_name=False,
    )
    # No epoch callback: Lightning's fit loop calls EpochSampler.set_epoch, and the sampler hands
    # the epoch to the dataset with every index.
    callbacks: list[Any] = [
        checkpoint_cb, last_cb,
        ResultsCallback(run.path, spec.loss_terms, {k: spec.metrics.column(k) for k in spec.metrics.keys}),
        RNGStateCallback(), StopLoadersOnException(),
    ]
    if cfg.model.ema:
        callbacks.append(EMACallback(cfg.model.ema_decay, cfg.model.ema_tau))
    if progress_bar:
        callbacks.append(RichProgressBar())
    elif epoch_log is not None:
        from lucidyolo.engine.epoch_lines import EpochLines

        callbacks.append(EpochLines(epoch_log, spec.loss_terms, spec.metrics.keys, cfg.data.batch_size))
    callbacks += extra_callbacks or []
    t = cfg.trainer
    trainer = pl.Trainer(
        accelerator=t.accelerator, devices=t.devices, strategy=t.strategy, num_nodes=t.num_nodes,
        precision=t.precision,  # type: ignore[arg-type]
        max_epochs=t.max_epochs, gradient_clip_val=t.gradient_clip_val or None,
        deterministic=determinism(t.deterministic, cuda, uses_mps(cfg)),  # type: ignore[arg-type]
        accumulate_grad_batches=t.accumulate_grad_batches, limit_train_batches=t.limit_train_batches,
        limit_val_batches=t.limit_val_batches, check_val_every_n_epoch=t.check_val_every_n_epoch,
        log_every_n_steps=t.log_every_n_steps, default_root_dir=str(run.root), logger=[tb, csv],
        callbacks=callbacks, plugins=[AtomicCheckpointIO()], use_distributed_sampler=False,
        enable_model_summary=False, num_sanity_val_steps=0, enable_progress_bar=progress_bar,
    )
    skip_uninitialized_fill()
    return trainer, checkpoint_cb


def skip_uninitialized_fill() -> None:
    """Deterministic algorithms without torch's NaN fill of every new uninitialised tensor.

    ``torch.use_deterministic_algorithms(True)`` (Lightning's ``deterministic``) also
    writes NaN into every ``torch.empty`` so that a read of uninitialised memory shows;
    code that reads none (ours: the resumed and uninterrupted trajectories match bit for
    bit) gets the same numbers without it. The fill is an extra pass over every
    activation and gradient: a CPU step at 320 px x 8 took 441 instead of 411 ms with it.
    """
    import torch

    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
