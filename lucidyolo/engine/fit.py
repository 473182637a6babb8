"""``lucid fit``: run directory, loggers, callbacks and the Lightning Trainer."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

from lucidyolo.cli.console import console, info
from lucidyolo.config.resolve import config_to_yaml, run_config_class
from lucidyolo.config.schema import RunConfig
from lucidyolo.errors import ConfigError, RunInterrupted, UserError
from lucidyolo.tasks.api import TaskSpec

_LEAF_SPEC = r".*LeafSpec.*"
RUN_DIR_ENV = "LUCIDYOLO_RUN_DIR"


def quiet_known_warnings() -> None:
    """Filter the warnings we know are harmless (one by one, never all)."""
    warnings.filterwarnings("ignore", message=_LEAF_SPEC, category=FutureWarning)
    warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
    # our run directory already holds config.yaml when the CSV logger starts
    warnings.filterwarnings("ignore", message=r"Experiment logs directory .* exists and is not empty.*")
    warnings.filterwarnings("ignore", message=r".*is smaller than the logging interval.*")
    # a resumed run writes into its own checkpoints folder on purpose
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty.*")
    # torchvision 0.29 deprecates its JPEG decoder in favour of torchcodec; it is still the fastest here
    warnings.filterwarnings("ignore", message=r"The image decoding and encoding capabilities of TorchVision.*")


def quiet_lightning_logs() -> None:
    """Lightning's info lines (GPU available, tips) only with ``--verbose``."""
    import logging

    from lucidyolo.cli.console import verbosity

    level = logging.INFO if verbosity() >= 2 else logging.WARNING
    for name in ("pytorch_lightning", "lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(level)


def uses_cuda(cfg: RunConfig) -> bool:
    import torch

    acc = cfg.trainer.accelerator.lower()
    return acc in ("gpu", "cuda") or (acc == "auto" and torch.cuda.is_available())


_warned_compile = False


def should_compile(requested: bool, spec: TaskSpec, cuda: bool) -> bool:
    """``model.compile_step`` applies on CUDA to tasks that declare it; elsewhere warn once and train eagerly."""
    global _warned_compile
    if not requested:
        return False
    task = spec.name
    if cuda and spec.capabilities.compile_step:
        return True
    if not _warned_compile:
        _warned_compile = True
        where = "this machine has no CUDA" if not cuda else f"task {task!r} does not declare compile_step"
        warnings.warn(f"model.compile_step is ignored ({where}); training eagerly.", UserWarning, stacklevel=2)
    return False


def resolve_resume(resume: Path) -> tuple[Path, Path]:
    """``--resume`` given a run directory or a checkpoint -> (checkpoint, run directory)."""
    path = Path(resume)
    if path.is_dir():
        ckpt = path / "checkpoints" / "last.ckpt"
        if not ckpt.is_file():
            raise UserError(
                f"Run directory {path} has no checkpoints/last.ckpt to resume from.",
                fix="Pass the run's version folder (runs/<task>/version_N) or a .ckpt file.",
            )
        return ckpt, path
    if path.is_file():
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        return path, run_dir
    raise UserError(f"--resume {path}: no such file or directory.", fix="Pass a run directory or a .ckpt file.")


def config_from_checkpoint(spec: TaskSpec, ckpt: dict[str, Any]) -> RunConfig:
    raw = dict(ckpt.get("lucid", {}).get("config") or {})
    raw.pop("num_classes_resolved", None)
    if not raw:
        raise UserError("The checkpoint holds no lucid config.", fix="Resume only checkpoints written by `lucid fit`.")
    task = raw.get("model", {}).get("task")
    if task != spec.name:
        raise ConfigError(
            f"The checkpoint was trained for task {task!r}, not {spec.name!r}.", fix=f"Run `lucid fit {task} --resume ...`."
        )
    return run_config_class(spec).model_validate(raw)


def _next_version(root: Path) -> int:
    versions = [int(p.name.split("_", 1)[1]) for p in root.glob("version_*") if p.name.split("_", 1)[1].isdigit()]
    return max(versions, default=-1) + 1


def run_fit(spec: TaskSpec, cfg: RunConfig, resume: Path | None = None, extra_callbacks: list[Any] | None = None) -> dict[str, Any]:
    """Train; returns a summary (run directory, best checkpoint, final metrics).

    SIGINT/SIGTERM stop the run at once with :class:`~lucidyolo.errors.RunInterrupted`;
    a loader worker's death or exception ends it with a :class:`~lucidyolo.errors.UserError`;
    either way the loader workers are stopped and the shared-memory segments they left removed.
    """
    from lucidyolo.data import shm_segments
    from lucidyolo.engine.interrupt import stop_on_signals

    with stop_on_signals():
        try:
            return _fit(spec, cfg, resume, extra_callbacks)
        finally:
            shm_segments.remove_leftovers()


def _resume_command(spec: TaskSpec, run_dir: Path) -> str | None:
    return f"lucid fit {spec.name} --resume {run_dir}" if (run_dir / "checkpoints" / "last.ckpt").is_file() else None


def _fit(spec: TaskSpec, cfg: RunConfig, resume: Path | None, extra_callbacks: list[Any] | None) -> dict[str, Any]:
    quiet_known_warnings()
    quiet_lightning_logs()
    import pytorch_lightning as pl
    import torch
    from pytorch_lightning.callbacks import ModelCheckpoint, RichProgressBar
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

    from lucidyolo.data.loader import RESUME_HINT, WorkerDiedError, WorkerFailedError, worker_error
    from lucidyolo.engine.build import (
        build_datamodule,
        build_system,
        data_root_of,
        dataset_meta,
        open_split,
        resolve_num_classes,
    )
    from lucidyolo.engine.callbacks import (
        AtomicCheckpointIO,
        EMACallback,
        ResultsCallback,
    )
    from lucidyolo.engine.checkpoint import load_checkpoint
    from lucidyolo.engine.interrupt import StopLoadersOnException
    from lucidyolo.engine.rng_state import RNGStateCallback

    ckpt_path: Path | None = None
    if resume is not None:
        ckpt_path, run_dir = resolve_resume(resume)
        cfg = config_from_checkpoint(spec, load_checkpoint(ckpt_path))  # refuses unsafe files first
        root, version = run_dir.parent, run_dir.name
    elif os.environ.get(RUN_DIR_ENV) and os.environ.get("LOCAL_RANK", "0") != "0":
        # a DDP child re-running the command line: join the run directory rank 0 created
        run_dir = Path(os.environ[RUN_DIR_ENV])
        root, version = run_dir.parent, run_dir.name
    else:
        root = Path(cfg.trainer.default_root_dir or Path("runs") / spec.name)
        root.mkdir(parents=True, exist_ok=True)
        version = f"version_{_next_version(root)}"
        run_dir = root / version
        os.environ[RUN_DIR_ENV] = str(run_dir.resolve())  # inherited by DDP children

    data_root = data_root_of(spec, cfg)
    train_src = open_split(spec, cfg, data_root, cfg.data.train_split, "train")
    val_src = open_split(spec, cfg, data_root, cfg.data.val_split, "val")
    num_classes = resolve_num_classes(cfg, train_src)
    if list(val_src.class_names) != list(train_src.class_names):
        raise UserError(
            "The train and val splits declare different classes.",
            why="labels would mean different things in training and validation.",
            fix="Make both splits use the same category list.",
        )

    cuda = uses_cuda(cfg)
    pl.seed_everything(cfg.seed, workers=False, verbose=False)
    system = build_system(
        spec, cfg, num_classes, list(train_src.class_names), meta=dataset_meta(spec, train_src), channels_last=cuda
    )
    if should_compile(cfg.model.compile_step, spec, cuda):
        # The bound method, not the module: checkpoint keys stay those of the eager model. Batch size
        # and padded GT count are dynamic so the last short batch or a denser batch do not recompile.
        system.use_compiled_objective(torch.compile(system.objective, dynamic=True))
    datamodule = build_datamodule(spec, cfg, train_src, val_src, cuda=cuda)
    plan = datamodule.worker_plan()  # refuses a named worker count that cannot fit /dev/shm, before training

    run_dir.mkdir(parents=True, exist_ok=True)
    if os.environ.get("LOCAL_RANK", "0") == "0":
        (run_dir / "config.yaml").write_text(config_to_yaml(cfg))
    tb = TensorBoardLogger(save_dir=str(root), name="", version=version, default_hp_metric=False)
    csv = CSVLogger(save_dir=str(root), name="", version=version)
    checkpoint_cb = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename="best", monitor=spec.metrics.monitor, mode="max",
        save_top_k=1, enable_version_counter=False, auto_insert_metric_name=False,
    )
    # A separate unmonitored callback writes last.ckpt every epoch: Lightning's save_last only
    # writes when the monitored checkpoint was written in the same step.
    last_cb = ModelCheckpoint(
        dirpath=run_dir / "checkpoints", filename="last", monitor=None, save_top_k=1,
        enable_version_counter=False, auto_insert_metric_name=False,
    )
    # No epoch callback: Lightning's fit loop calls EpochSampler.set_epoch, and the sampler hands
    # the epoch to the dataset with every index.
    callbacks: list[Any] = [
        checkpoint_cb, last_cb,
        ResultsCallback(run_dir, spec.loss_terms, {k: spec.metrics.column(k) for k in spec.metrics.keys}),
        RNGStateCallback(), StopLoadersOnException(),
    ]
    if cfg.model.ema:
        callbacks.append(EMACallback(cfg.model.ema_decay, cfg.model.ema_tau))
    if console.is_terminal:
        callbacks.append(RichProgressBar())
    callbacks += extra_callbacks or []
    t = cfg.trainer
    trainer = pl.Trainer(
        accelerator=t.accelerator, devices=t.devices, strategy=t.strategy, num_nodes=t.num_nodes,
        precision=t.precision,  # type: ignore[arg-type]
        max_epochs=t.max_epochs, gradient_clip_val=t.gradient_clip_val or None,
        deterministic=(True if t.deterministic and not cuda else ("warn" if t.deterministic else False)),
        accumulate_grad_batches=t.accumulate_grad_batches, limit_train_batches=t.limit_train_batches,
        limit_val_batches=t.limit_val_batches, check_val_every_n_epoch=t.check_val_every_n_epoch,
        log_every_n_steps=t.log_every_n_steps, default_root_dir=str(root), logger=[tb, csv],
        callbacks=callbacks, plugins=[AtomicCheckpointIO()], use_distributed_sampler=False,
        enable_model_summary=False, num_sanity_val_steps=0, enable_progress_bar=console.is_terminal,
    )
    info(
        f"[bold]lucid fit {spec.name}[/bold]: variant {cfg.model.variant}, {num_classes} classes, "
        f"{len(train_src)} train / {len(val_src)} val images from {data_root or train_src.name}, run dir {run_dir}"
    )
    if os.environ.get("LOCAL_RANK", "0") == "0":
        info(plan.describe())
    try:
        trainer.fit(system, datamodule=datamodule, ckpt_path=str(ckpt_path) if ckpt_path else None)
    except RunInterrupted as stop:
        stop.resume = _resume_command(spec, run_dir)
        raise
    except Exception as exc:
        # torch reports a dead worker from its SIGCHLD handler, wherever the main thread is (not only
        # inside the loader's next), so the mapping is repeated here
        err = exc if isinstance(exc, WorkerDiedError | WorkerFailedError) else worker_error(exc, in_loader=False)
        if err is None:
            raise
        command = _resume_command(spec, run_dir)
        fix = (err.fix or "").replace(
            RESUME_HINT,
            f"The last finished epoch is saved: continue with `{command}`." if command else "No epoch had finished yet.",
        )
        raise type(err)(err.what, why=err.why, fix=fix) from (exc if err is not exc else exc.__cause__)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if getattr(v, "numel", lambda: 0)() == 1}
    best = checkpoint_cb.best_model_path or str(run_dir / "checkpoints" / "last.ckpt")
    if trainer.is_global_zero:
        shown = ", ".join(f"{k} {metrics.get(k, math.nan):.4f}" for k in spec.metrics.summary or spec.metrics.keys)
        info(f"done: {shown}; best checkpoint {best}")
    return {"run_dir": run_dir, "best": best, "metrics": metrics, "trainer": trainer, "system": system}
