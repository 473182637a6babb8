"""The Lightning ``Trainer`` of a run: loggers, checkpoint callbacks, the engine's callbacks, determinism."""

from __future__ import annotations

from typing import Any

from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.run.run_dir import RunDir
from lucidyolo.tasks.api import TaskSpec

TB_FLUSH_SECS = 5
"""TensorBoard event-file flush interval (s): also the longest a stopped run waits for its writer thread."""


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


def check_accelerator(cfg: RunConfig) -> None:
    """Refuse an accelerator this machine does not have, naming what it has (Lightning raises a bare
    ``MisconfigurationException`` from deep inside ``Trainer``)."""
    import torch

    acc = cfg.trainer.accelerator.lower()
    has_mps = bool(getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available())
    has = "CUDA GPUs" if torch.cuda.is_available() else "an Apple GPU (mps)" if has_mps else "only its CPU"
    why = None
    if acc in ("gpu", "cuda") and not torch.cuda.is_available() and not (acc == "gpu" and has_mps):
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        why = f"torch {torch.__version__} ({build}) sees no CUDA device on this machine"
    elif acc == "mps" and not has_mps:
        why = "torch sees no Apple Metal (mps) device on this machine"
    elif acc not in ("auto", "cpu", "gpu", "cuda", "mps"):
        why = "lucid trains on cpu, cuda (gpu) or mps"
    if why is not None:
        from lucidyolo.errors import ConfigError

        raise ConfigError(
            f"`trainer.accelerator` = {cfg.trainer.accelerator!r}, but this machine has {has}.",
            why=why + ".",
            fix="Use `--trainer.accelerator auto` (whatever the machine has) or `--trainer.accelerator cpu`.",
        )


def resolve_precision(cfg: RunConfig, cuda: bool) -> RunConfig:
    """The config with ``trainer.precision: auto`` resolved for the device this run trains on.

    ``auto`` is ``bf16-mixed`` where the device multiplies bfloat16 in hardware
    (:func:`lucidyolo.optim.musgd.native_bf16_matmul`: CPUs with AMX tiles, CUDA
    from compute capability 8.0), else ``32-true``: side by side on one AMX CPU the
    shapes benchmark trained at 21.0-21.8 instead of 17.1 img/s with no loss of
    mAP seen in three pairs (docs/DECISIONS.md), while elsewhere bfloat16 is
    emulated and slower than float32. Validation always runs in float32
    (``TrainingSystem.validation_step``), so the epoch metric stays the one
    ``lucid eval --no-fold`` reproduces. Any other value passes through. The
    resolved value is what the run's config and checkpoints record, so a resumed
    run keeps it on any machine. ``cuda``: :func:`uses_cuda` of the run, which the
    caller has already computed.
    """
    if str(cfg.trainer.precision) != "auto":
        return cfg
    import torch

    from lucidyolo.optim.musgd import native_bf16_matmul

    acc = cfg.trainer.accelerator.lower()
    if cuda:
        device: torch.device | None = torch.device("cuda")
    elif uses_mps(cfg) or acc not in ("auto", "cpu"):
        device = None
    else:
        device = torch.device("cpu")
    precision = "bf16-mixed" if device is not None and native_bf16_matmul(device) else "32-true"
    return cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"precision": precision})})


def precision_note(requested: str, resolved: str) -> str | None:
    """A line naming the precision ``auto`` chose when it is not float32 (the numbers depend on the machine), else ``None``."""
    if str(requested) != "auto" or resolved == "32-true":
        return None
    return (f"precision {resolved} (auto: this device multiplies bfloat16 in hardware; validation stays float32; "
            "`--trainer.precision 32-true` trains in float32)")


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

    ``epoch_log(line)``, when given, receives the start lines (how busy the machine is, the run's size) and one
    line per epoch; with ``progress_bar`` the lines stay above a live bar of the current epoch
    (:class:`~lucidyolo.engine.run.epoch_lines.EpochBar`).
    """
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint

    from lucidyolo.engine.loop.callbacks import AtomicCheckpointIO, EMACallback, ResultsCallback
    from lucidyolo.engine.process.interrupt import StopLoadersOnException
    from lucidyolo.engine.process.layer_sync import GlobalBatchNorm
    from lucidyolo.engine.process.rng_state import RNGStateCallback
    from lucidyolo.engine.run.run_loggers import RunCSVLogger, RunTensorBoardLogger

    # flush_secs bounds how long closing the writer can wait. A stop signal raises in the main thread
    # between any two bytecodes, also inside the writer queue's notify(); a wake-up lost there left
    # the writer thread asleep for its whole flush interval (120 s by default) while Lightning's
    # interrupt path joined it: Ctrl-C took two minutes (seen in CI and reproduced under load).
    tb = RunTensorBoardLogger(save_dir=str(run.root), name="", version=run.version, default_hp_metric=False,
                              flush_secs=TB_FLUSH_SECS)
    # metrics.csv is rewritten atomically (Lightning's logger truncates it in place); no hparams.yaml
    csv = RunCSVLogger(save_dir=str(run.root), name="", version=run.version)
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
    if spec.matches is not None and spec.metrics.monitor is not None:
        from lucidyolo.engine.run.best_curves import BestCurves

        callbacks.append(BestCurves(spec.matches, spec.metrics.monitor, checkpoint_cb, run.path,
                                    spec.metrics.plot_names))
    if cfg.ema.enabled:
        callbacks.append(EMACallback(cfg.ema.decay, cfg.ema.tau))
    if progress_bar or epoch_log is not None:
        from lucidyolo.engine.run.epoch_lines import EpochBar, EpochLines

        lines = EpochBar if progress_bar else EpochLines
        callbacks.append(lines(epoch_log, spec.loss_terms, spec.metrics.keys, cfg.data.batch_size,  # type: ignore[arg-type]
                               img_size=cfg.data.img_size, main_metric=spec.metrics.monitor))
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
        callbacks=callbacks, plugins=[AtomicCheckpointIO(), *([GlobalBatchNorm()] if t.sync_batchnorm else [])],
        use_distributed_sampler=False,
        enable_model_summary=False, num_sanity_val_steps=0, enable_progress_bar=progress_bar,
    )
    from lucidyolo.engine.process.rank_watch import watch_ranks

    watch_ranks(trainer, lambda: run.resume_command(spec.name))  # a rank that dies is named, with the resume command
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
