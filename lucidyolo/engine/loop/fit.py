"""``lucid fit``: the run, from resolved config to a trained system.

The pieces live beside it: :mod:`lucidyolo.engine.run.run_dir` (where the run
lives), :mod:`lucidyolo.engine.loop.build` (config -> splits, system, datamodule),
:mod:`lucidyolo.engine.loop.trainer_factory` (the Lightning ``Trainer``).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lucidyolo.atomic_write import atomic_write_text, remove_abandoned
from lucidyolo.config.resolve import config_to_yaml, validate_config
from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.process.disk_errors import disk_error, writing
from lucidyolo.engine.process.known_warnings import quiet_known_warnings, quiet_lightning_logs
from lucidyolo.engine.run.run_dir import refuse_finished
from lucidyolo.errors import ConfigError, RunInterrupted, UserError
from lucidyolo.tasks.api import TaskSpec

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


def config_from_checkpoint(spec: TaskSpec, ckpt: dict[str, Any], run_path: Path | None = None,
                           checkpoint: Path | None = None) -> RunConfig:
    """The config ``--resume`` continues with: the one stored in the checkpoint (not the run's ``config.yaml``),
    validated like any other, the task's rules included.

    Raises:
        UserError: a checkpoint without a lucid config, or of another task.
        ConfigError: a config the schema refuses (say, an obb run asking for 2 devices), before anything runs.
    """
    raw = dict(ckpt.get("lucid", {}).get("config") or {})
    raw.pop("num_classes_resolved", None)
    if not raw:
        raise UserError("The checkpoint holds no lucid config.", fix="Resume only checkpoints written by `lucid fit`.")
    task = raw.get("model", {}).get("task")
    if task != spec.name:
        raise ConfigError(
            f"The checkpoint was trained for task {task!r}, not {spec.name!r}.", fix=f"Run `lucid fit {task} --resume ...`."
        )
    try:
        return validate_config(spec, raw)
    except ConfigError as exc:
        run, weights = run_path or "RUN", checkpoint or "CHECKPOINT"
        raise ConfigError(
            f"{exc.what} `--resume` continues with the config stored in {weights}.",
            why=exc.why,
            fix=(f"{exc.fix} `--resume` takes no override; start a new run from the checkpoint's weights instead: "
                 f"`lucid fit {spec.name} --config {run}/config.yaml --model.weights {weights}`, the corrected key "
                 "as an override."),
        ) from None


def read_start_weights(
    cfg: RunConfig, log: Callable[[str], None], progress: Callable[[int, int | None], None] | None = None,
) -> tuple[Any, str]:
    """Resolve and read ``model.weights`` (a lucid or published file, a run, a URL): ``(SourceWeights, shown name)``.

    Read before the model is built: the source may size the class towers (:func:`class_towers_of`).
    """
    from lucidyolo.engine.weights.transfer import read_weights
    from lucidyolo.engine.weights.weights_source import is_url, resolve_weights, split_digest

    m = cfg.model
    assert m.weights is not None
    path = resolve_weights(m.weights, m.weights_sha256, progress=progress, log=log)
    try:
        weights = read_weights(path)
    except UserError as exc:
        if is_url(m.weights):  # a refused download kept in the cache would be refused again on every run
            path.unlink(missing_ok=True)
            exc.why = f"{exc.why + ' ' if exc.why else ''}The download was deleted from the cache ({path})."
            exc.args = (exc.render_plain(),)
        raise
    return weights, split_digest(m.weights, None)[0]


def class_towers_of(cfg: RunConfig, source: Any, num_classes: int) -> RunConfig:
    """``cfg`` with ``model.class_width`` set to the source's class count when it has more classes.

    The published class towers are ``max(C3, min(classes, 100))`` wide: a nano started from 80-class
    weights on a 4-class set keeps the 80-wide towers, so they load whole instead of starting fresh.
    """
    if getattr(cfg.model, "class_width", "absent") is not None or len(source.class_names) <= num_classes:
        return cfg
    model = cfg.model.model_copy(update={"class_width": len(source.class_names)})
    return cfg.model_copy(update={"model": model})


def start_from_weights(
    spec: TaskSpec, cfg: RunConfig, model: Any, class_names: list[str], meta: dict[str, Any],
    source: tuple[Any, str],
) -> Any:
    """Load what fits of the read ``source`` (its variant already checked) into ``model``; the :class:`TransferReport`."""
    from lucidyolo.engine.weights.transfer import transfer_weights

    weights, shown = source
    return transfer_weights(model, weights, class_names, meta, class_match=cfg.model.class_match,
                            hook=spec.transfer_weights, shown_source=shown)


def freeze_plan(cfg: RunConfig, model: Any, log: Callable[[str], None]) -> tuple[Any, ...]:
    """``()`` or ``(FreezeCallback, its summary line)`` for ``model.freeze``."""
    from lucidyolo.engine.loop.freeze import FreezeCallback, describe, frozen_modules

    m = cfg.model
    picked = frozen_modules(model, m.freeze)
    if not picked:
        if m.freeze_epochs is not None:
            raise ConfigError("`--model.freeze_epochs` is set but nothing is frozen.",
                              fix="Add `--model.freeze backbone` (or neck, or N), or drop freeze_epochs.")
        return ()
    names = [n for n, _ in picked]
    total = sum(p.numel() for _, mod in picked for p in mod.parameters())
    return FreezeCallback(names, m.freeze_epochs, log), describe(names, m.freeze, m.freeze_epochs, total)


def run_fit(
    spec: TaskSpec, cfg: RunConfig, resume: Path | None = None, extra_callbacks: list[Any] | None = None, *,
    log: Callable[[str], None] | None = None, progress_bar: bool = False, verbose: bool = False,
    download_progress: Callable[[int, int | None], None] | None = None,
) -> dict[str, Any]:
    """Train; returns a summary (run directory, best checkpoint, final metrics, the trainer and the system, and
    ``transfer``: ``transfer.json``'s content when ``model.weights`` started the run, else None).

    The engine prints nothing itself: ``log`` receives the run's few status lines
    (what is trained on what, the worker plan, the final metrics), ``progress_bar``
    shows Lightning's bar and ``verbose`` lets Lightning's own info lines through;
    ``download_progress(done, total)`` follows a ``model.weights`` URL's download.

    SIGINT/SIGTERM stop the run at once with :class:`~lucidyolo.errors.RunInterrupted`;
    a loader worker's death or exception ends it with a :class:`~lucidyolo.errors.UserError`;
    either way the loader workers are stopped and the shared-memory segments they left removed.
    """
    from lucidyolo.data import shm_segments
    from lucidyolo.engine.process.interrupt import stop_on_signals

    with stop_on_signals(), _process_state_kept():
        try:
            return _fit(spec, cfg, resume, extra_callbacks, log or _silent, progress_bar, verbose, download_progress)
        finally:
            shm_segments.remove_leftovers()


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """Give the caller back its environment, torch thread count and pixel limit when the fit returns.

    A fit sets variables for the processes it starts (the run folder, thread count and pixel limit
    for DDP children and loader workers; Lightning its seed); in a script or notebook they would
    outlive it: the next fit would take the thread count the first one chose on a busy machine
    instead of measuring, and every ``lucid`` the script starts would inherit them.
    """
    import torch

    from lucidyolo.data import pixel_limit

    environment = dict(os.environ)
    threads, limit = torch.get_num_threads(), pixel_limit._limit
    try:
        yield
    finally:
        for name in set(os.environ) - set(environment):
            del os.environ[name]
        for name, value in environment.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        torch.set_num_threads(threads)
        pixel_limit._limit = limit


def _write_label_stats(spec: TaskSpec, train_src: Any, run: Any) -> str:
    """``labels.json`` + ``labels.png`` of the training split into the run folder; the log line naming them.

    Read from the labels the fit already holds (no image decoded); a resumed run keeps the files it has.
    """
    from lucidyolo.engine.loop.build import dataset_meta
    from lucidyolo.engine.run.label_stats import label_statistics, summary_line, write_label_stats

    stats = label_statistics(train_src, spec.label_stats, dataset_meta(spec, train_src), boxes=spec.boxes)
    png, _ = writing(lambda: write_label_stats(stats, run.path), run.path / "labels.png", run, spec.name)
    return summary_line(stats, png)


def _batch_images(spec: TaskSpec, cfg: RunConfig, run: Any, train_src: Any, log: Callable[[str], None]) -> Any:
    """The callback drawing ``data.plot_batches`` batches into the run folder, or ``None`` (with a line saying why
    when the task cannot draw its targets)."""
    from lucidyolo.engine.loop.build import dataset_meta
    from lucidyolo.engine.run.batch_images import batch_images_callback

    if cfg.data.plot_batches > 0 and (missing := spec.missing_hooks("draw", "target_rows")):
        log(f"batch images: task {spec.name!r} provides no {' / '.join(missing)} hook, so none are drawn")
    return batch_images_callback(
        cfg.data.plot_batches, run.path, draw=spec.draw, target_rows=spec.target_rows,
        predict=None if spec.predict is None else functools.partial(spec.predict, cfg=cfg.model),
        class_names=list(train_src.class_names), meta=dataset_meta(spec, train_src),
    )


def _empty_epoch_warning(spec: TaskSpec, log: Callable[[str], None]) -> list[Any]:
    """The warning for an epoch that saw no instance, for a task whose targets are instances (no per-image label)."""
    from lucidyolo.engine.loop.empty_targets import EmptyEpochWarning
    from lucidyolo.structures.fields import field_specs

    per_image = any(a.per_image for f in field_specs(spec.fields) for a in f.attrs)
    return [] if per_image else [EmptyEpochWarning(log)]


def _silent(message: str) -> None:
    """The default ``log``: the Python API prints nothing unless asked."""


def _fit(
    spec: TaskSpec, cfg: RunConfig, resume: Path | None, extra_callbacks: list[Any] | None,
    log: Callable[[str], None], progress_bar: bool, verbose: bool,
    download_progress: Callable[[int, int | None], None] | None = None,
) -> dict[str, Any]:
    quiet_known_warnings()
    quiet_lightning_logs(verbose)
    import pytorch_lightning as pl
    import torch

    from lucidyolo.data.bad_images import drop_bad_images
    from lucidyolo.data.label_coverage import check_label_coverage
    from lucidyolo.data.label_duplicates import duplicate_rows_warning
    from lucidyolo.data.layouts import check_same_categories
    from lucidyolo.data.pixel_limit import set_max_image_pixels
    from lucidyolo.engine.loop.build import (
        build_datamodule,
        build_system,
        data_root_of,
        dataset_meta,
        global_processes,
        local_ranks,
        open_split,
        resolve_num_classes,
        resolve_schedule,
    )
    from lucidyolo.engine.loop.trainer_factory import (
        check_accelerator,
        resolve_precision,
        uses_cuda,
        uses_mps,
    )
    from lucidyolo.engine.process.cpu_threads import apply_threads, resolve_threads
    from lucidyolo.engine.run.run_dir import is_global_rank_zero, remove_unstarted, run_dir_for
    from lucidyolo.engine.weights.checkpoint import load_checkpoint
    from lucidyolo.engine.weights.transfer import refuse_variant_mismatch

    run = run_dir_for(spec.name, cfg, resume) if resume is not None else None
    variant_given = "variant" in cfg.model.model_fields_set  # before validation below sets every field
    if run is not None and run.checkpoint is not None:
        ckpt = load_checkpoint(run.checkpoint)  # refuses unsafe files first
        cfg = config_from_checkpoint(spec, ckpt, run.path, run.checkpoint)
        refuse_finished(spec.name, run.path, ckpt, cfg)
    else:  # a config built or changed in Python meets the task's rules as a resolved one does
        cfg = validate_config(spec, cfg)

    check_accelerator(cfg)
    source = None
    if cfg.model.weights is not None and (run is None or run.checkpoint is None):  # a resume has its own weights
        # before the dataset scan (tens of seconds on a large set): a missing, unsafe or mismatched file is named first
        source = read_start_weights(cfg, log, download_progress)
        if not variant_given and source[0].source_format != "lucid" and source[0].variant != cfg.model.variant:
            # a published file and no variant asked for: the file's (docs/DECISIONS.md, issue 44)
            cfg = validate_config(spec, cfg.model_dump() | {"model": {**cfg.model.model_dump(),
                                                                      "variant": source[0].variant}})
        refuse_variant_mismatch(source[0], cfg.model.variant, source[1])
    data_root = data_root_of(spec, cfg)
    set_max_image_pixels(cfg.data.max_image_pixels)  # every image read from here on, in workers too
    train_src = open_split(spec, cfg, data_root, cfg.data.train_split, "train")
    train_src.run_fit_checks(cfg.data.img_size)  # the reader's own refusals of a training split
    val_src = open_split(spec, cfg, data_root, cfg.data.val_split, "val")
    skipped: dict[str, list[tuple[Path, str]]] = {}
    if cfg.data.skip_bad_images:
        train_src, skipped["train"] = drop_bad_images(train_src)
        val_src, skipped["val"] = drop_bad_images(val_src)
        skipped = {k: v for k, v in skipped.items() if v}
    if (coverage := check_label_coverage(train_src, "train")) is not None:  # refuses a split with no label at all
        log(f"[yellow]warning:[/yellow] {coverage}")
    if (duplicates := duplicate_rows_warning(train_src)) is not None:
        log(f"[yellow]warning:[/yellow] {duplicates}")
    num_classes = resolve_num_classes(cfg, train_src)
    check_same_categories(train_src, val_src)

    cuda = uses_cuda(cfg)
    ranks = global_processes(cfg, cuda)  # every node's processes: the schedule follows the global batch
    cfg, recipe = resolve_schedule(cfg, len(train_src), ranks)  # the 'auto' schedule values
    requested_precision, cfg = cfg.trainer.precision, resolve_precision(cfg, cuda)
    processes_here = local_ranks(cfg, cuda)
    cfg, threads_note = resolve_threads(cfg, processes_here)  # before any torch work: the pool is sized once
    apply_threads(int(cfg.trainer.threads), launches=processes_here > 1)
    if threads_note is not None and os.environ.get("LOCAL_RANK", "0") == "0":
        log(threads_note)
    pl.seed_everything(cfg.seed, workers=False, verbose=False)
    # channels_last on CUDA and on the CPU (oneDNN's convolutions): a CPU step at 320 px x 8 on 2 cores goes
    # from 429 to 308 ms (forward 132 -> 74 ms, backward 191 -> 140 ms); MPS keeps the default layout.
    if source is not None:
        cfg = class_towers_of(cfg, source[0], num_classes)
    system = build_system(
        spec, cfg, num_classes, list(train_src.class_names), meta=dataset_meta(spec, train_src),
        channels_last=cuda or not uses_mps(cfg),
    )
    start = None
    if source is not None:
        start = start_from_weights(spec, cfg, system.model, list(train_src.class_names),
                                   dataset_meta(spec, train_src), source)
    freeze = freeze_plan(cfg, system.model, log)
    if should_compile(cfg.model.compile_step, spec, cuda):
        # The bound method, not the module: checkpoint keys stay those of the eager model. Batch size
        # and padded GT count are dynamic so the last short batch or a denser batch do not recompile.
        system.use_compiled_objective(torch.compile(system.objective, dynamic=True))
    datamodule = build_datamodule(spec, cfg, train_src, val_src, cuda=cuda)
    plan = datamodule.worker_plan()  # refuses a named worker count that cannot fit /dev/shm, before training

    # The folder is claimed only now that the config, data and plan are known to work: a refused start
    # leaves nothing behind. What fails later, before the first step, removes it again (remove_unstarted).
    if run is None:
        root = Path(cfg.trainer.default_root_dir or Path("runs") / spec.name)
        run = writing(lambda: run_dir_for(spec.name, cfg), root, None)
    from lucidyolo.engine.loop.callbacks import FirstStep

    started = FirstStep()
    try:
        if skipped and is_global_rank_zero() and not run.pending:
            from lucidyolo.data.bad_images import bad_images_report

            listing = run.path / "bad_images.txt"
            writing(lambda: atomic_write_text(listing, bad_images_report(skipped)), listing, run, spec.name)
            counts = ", ".join(f"{len(v)} {k}" for k, v in skipped.items())
            log(f"[yellow]warning:[/yellow] --data.skip_bad_images left out {counts} image file(s) that cannot be "
                f"used; each is listed with its reason in {listing}")
        return _train(spec, cfg, run, started, system, datamodule, plan, recipe, requested_precision, num_classes,
                      train_src, val_src, data_root, ranks, cuda, [*freeze[:1], *(extra_callbacks or [])], log,
                      progress_bar, start, freeze[1:])
    except BaseException:
        if not started.seen:
            remove_unstarted(run)
        raise


def _train(
    spec: TaskSpec, cfg: RunConfig, run: Any, started: Any, system: Any, datamodule: Any, plan: Any, recipe: Any,
    requested_precision: str, num_classes: int, train_src: Any, val_src: Any, data_root: Any, ranks: int, cuda: bool,
    extra_callbacks: list[Any] | None, log: Callable[[str], None], progress_bar: bool, start: Any = None,
    notes: tuple[str, ...] = (),
) -> dict[str, Any]:
    from lucidyolo.data.bad_images import mid_run_image_error
    from lucidyolo.data.loader import RESUME_HINT, WorkerDiedError, WorkerFailedError, worker_error
    from lucidyolo.engine.loop.callbacks import JoinRankZeroRunDir
    from lucidyolo.engine.loop.trainer_factory import make_trainer, precision_note
    from lucidyolo.engine.process.rank_watch import rank_death
    from lucidyolo.engine.run.run_dir import is_global_rank_zero, stale_temporaries

    if run.checkpoint is not None:
        remove_abandoned(stale_temporaries(run.path))  # a SIGKILL mid-write left them; ~a checkpoint each
    if is_global_rank_zero() and not run.pending:
        config_file = run.path / "config.yaml"
        writing(lambda: atomic_write_text(config_file, config_to_yaml(cfg)), config_file, run, spec.name)
    pictures = _batch_images(spec, cfg, run, train_src, log) if is_global_rank_zero() and not run.pending else None
    trainer, checkpoint_cb = make_trainer(
        spec, cfg, run, cuda=cuda, progress_bar=progress_bar,
        extra_callbacks=[JoinRankZeroRunDir(run), started, *(extra_callbacks or []), *([pictures] if pictures else []),
                         *_empty_epoch_warning(spec, log)],
        epoch_log=None if log is _silent else log,
    )
    shown_dir = "rank 0's run dir" if run.pending else f"run dir {run.path}"
    log(
        f"[bold]lucid fit {spec.name}[/bold]: variant {cfg.model.variant}, {num_classes} classes, "
        f"{len(train_src)} train / {len(val_src)} val images from {data_root or train_src.name}, {shown_dir}"
    )
    if is_global_rank_zero() and not run.pending and (run.checkpoint is None or not (run.path / "labels.json").exists()):
        log(_write_label_stats(spec, train_src, run))
    if start is not None and is_global_rank_zero() and not run.pending:
        import json

        target = run.path / "transfer.json"
        writing(lambda: atomic_write_text(target, json.dumps(start.as_json(), indent=1) + "\n"), target, run, spec.name)
    if os.environ.get("LOCAL_RANK", "0") == "0":
        if start is not None:
            log(start.line())
        for note in notes:
            log(note)
        log(plan.describe())
        log(recipe.describe(cfg.optim.lr, cfg.optim.lr_reference_batch,
                            cfg.data.batch_size * ranks * cfg.trainer.accumulate_grad_batches, cfg.trainer.max_epochs))
        if (note := precision_note(requested_precision, cfg.trainer.precision)) is not None:
            log(note)
    try:
        trainer.fit(system, datamodule=datamodule, ckpt_path=str(run.checkpoint) if run.checkpoint else None)
    except RunInterrupted as stop:
        rank_death(trainer, None)  # the stop is reported, not a rank it ended
        stop.resume = run.resume_command(spec.name)
        stop.epochs_done = int(trainer.current_epoch)
        if stop.resume is None:
            stop.fix = "No epoch had finished; start the run again."
        raise
    except Exception as exc:
        if (died := rank_death(trainer, exc)) is not None:  # the dead rank, not the collective it broke
            raise died from None
        if (disk := disk_error(exc, run, spec.name)) is not None:
            raise disk from None
        if (undecodable := mid_run_image_error(exc, run.resume_command(spec.name))) is not None:
            raise undecodable from None
        # torch reports a dead worker from its SIGCHLD handler, wherever the main thread is (not only
        # inside the loader's next), so the mapping is repeated here
        err = exc if isinstance(exc, WorkerDiedError | WorkerFailedError) else worker_error(exc, in_loader=False)
        if err is None:
            raise
        command = run.resume_command(spec.name)
        fix = (err.fix or "").replace(
            RESUME_HINT,
            f"The last finished epoch is saved: continue with `{command}`." if command else "No epoch had finished yet.",
        )
        raise type(err)(err.what, why=err.why, fix=fix) from (exc if err is not exc else exc.__cause__)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if getattr(v, "numel", lambda: 0)() == 1}
    best = checkpoint_cb.best_model_path or str(run.path / "checkpoints" / "last.ckpt")
    if trainer.is_global_zero:
        from lucidyolo.engine.run.run_weights import WEIGHTS_FILE, weights_note, write_run_weights

        # the finished run's slim weights beside its checkpoints (an interrupted fit raised above)
        slim = writing(lambda: write_run_weights(best, run.path), run.path / WEIGHTS_FILE, run, spec.name)
        shown = ", ".join(f"{k} {metrics.get(k, math.nan):.4f}" for k in spec.metrics.summary or spec.metrics.keys)
        log(f"done: {shown}; best checkpoint {best}{weights_note(slim)}")
    return {"run_dir": run.path, "best": best, "metrics": metrics, "trainer": trainer, "system": system,
            "transfer": start.as_json() if start is not None else None}
