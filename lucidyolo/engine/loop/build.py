"""The one adapter from the pydantic config to plain constructor arguments."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path
from typing import Any

from lucidyolo.config.schema import RunConfig, device_count
from lucidyolo.data.layouts import open_source
from lucidyolo.data.source import ImageSource
from lucidyolo.data.user_cache import cache_dir
from lucidyolo.errors import ConfigError, DataError
from lucidyolo.tasks.api import TaskSpec

SYNTHETIC_VERSION = 2
"""Bump when the synthetic generator's output changes, so cached sets are rebuilt."""


def synthetic_root(spec: TaskSpec, cfg: RunConfig) -> Path:
    """Generate (once) and return the task's synthetic set for the embedded default run."""
    if spec.make_synthetic is None:
        raise ConfigError(
            f"Task {spec.name!r} needs `--data-root`: it has no built-in synthetic set.",
            fix="Pass `--data-root PATH` to a COCO, YOLO or DOTA dataset.",
        )
    n, size, seed = cfg.data.synthetic_images, cfg.data.img_size, cfg.seed
    out = cache_dir() / "synthetic" / f"{spec.name}-v{SYNTHETIC_VERSION}-n{n}-s{size}-seed{seed}"
    return Path(spec.make_synthetic(out, n, size, seed))


def data_root_of(spec: TaskSpec, cfg: RunConfig) -> Path | None:
    if cfg.data.data_root is None and not cfg.data.explicit_paths("train"):
        return synthetic_root(spec, cfg)
    return cfg.data.data_root


def open_split(spec: TaskSpec, cfg: RunConfig, root: Path | None, split: str, which: str) -> ImageSource:
    """Open one split; ``which`` is ``train`` or ``val`` (selects the explicit override paths)."""
    from lucidyolo.data.image_io import BadImagesError

    explicit = cfg.data.explicit_paths(which)
    if spec.read_split is not None:  # the task reads its own layout (e.g. class folders)
        if root is None:
            raise DataError(f"Task {spec.name!r} needs `--data-root`.", fix="Pass --data-root PATH.")
        return spec.read_split(root=root, split=split, fields=spec.fields, layout=cfg.data.layout,
                               explicit_paths=explicit)
    try:
        return open_source(root, split, spec.fields, layout=cfg.data.layout, **explicit)
    except BadImagesError as err:
        if not cfg.data.skip_bad_images or err.rest is None:
            raise
        err.rest.unreadable_images = err.bad  # the reader left them out; the fit runner lists them
        return err.rest
    except DataError as err:
        if which != "val" or "matches no dataset convention" not in err.what:
            raise
        raise DataError(
            err.what, why=err.why,
            fix=f"Validate on another split (e.g. `--data.val_split {cfg.data.train_split}`), or pass "
            "`--data.val_images` and `--data.val_ann_file`.",
        ) from None


def resolve_num_classes(cfg: RunConfig, source: ImageSource) -> int:
    """``model.num_classes``: 'auto' reads the dataset; an explicit number must match it."""
    found = len(source.class_names)
    if cfg.model.num_classes == "auto":
        return found
    if cfg.model.num_classes != found:
        raise DataError(
            f"`model.num_classes` = {cfg.model.num_classes} but the dataset declares {found} classes.",
            why="a silent mismatch trains against the wrong label space.",
            fix=f"Set `--model.num_classes {found}` or leave it at 'auto'.",
        )
    return found


def dataset_meta(spec: TaskSpec, source: ImageSource) -> dict[str, Any]:
    """The dataset meta the task declares (``spec.meta_keys``), read from the training split.

    Saved in every checkpoint so eval, predict and export rebuild the same model.
    """
    meta = source.meta()
    return {key: meta.get(key) for key in spec.meta_keys}


def build_system(
    spec: TaskSpec, cfg: RunConfig, num_classes: int, class_names: list[str], meta: dict[str, Any] | None = None,
    channels_last: bool = False,
) -> Any:
    """The LightningModule for ``spec`` from the config (plain arguments below this point)."""
    from lucidyolo.engine.loop.system import TrainingSystem

    if not spec.trainable:
        from lucidyolo.errors import NotAvailableError

        missing = spec.missing_hooks(*spec.FIT_HOOKS)
        what = ", ".join(missing) if missing else "a primary epoch metric (metrics.primary)"
        raise NotAvailableError(
            f"Task {spec.name!r} cannot be trained yet: its plugin does not provide {what}.",
            fix="Nothing was run.",
        )
    assert spec.build_model and spec.build_criterion and spec.decode and spec.build_metric and spec.metric_update
    m, o = cfg.model, cfg.optim
    meta = dict(meta or {})
    model = spec.build_model(cfg=m, num_classes=num_classes, meta=meta)
    if channels_last:
        import torch

        model = model.to(memory_format=torch.channels_last)
    return TrainingSystem(
        model,
        spec.build_criterion(cfg=m, num_classes=num_classes, meta=meta, model=model),
        functools.partial(spec.decode, cfg=m),  # the run's model config reaches decode (API 2.5)
        spec.build_metric(cfg=m, num_classes=num_classes, meta=meta),
        spec.metric_update,
        spec.metrics.keys,
        config={**cfg.model_dump(mode="json"), "num_classes_resolved": num_classes},
        decode_path=spec.default_decode_path,
        class_names=class_names,
        dataset_meta=meta,
        lr=o.lr, lr_reference_batch=o.lr_reference_batch, lr_scaling=o.lr_scaling, lrf=o.lrf, momentum=o.momentum,
        weight_decay=o.weight_decay, warmup_epochs=o.warmup_epochs,
        optimizer=o.optimizer, newton_schulz_dtype=o.newton_schulz_dtype,
        batch_size=cfg.data.batch_size, channels_last=channels_last,
    )


def build_datamodule(spec: TaskSpec, cfg: RunConfig, train: ImageSource, val: ImageSource, cuda: bool = False) -> Any:
    """The DataModule; ``data.device_hsv`` is honoured only where it can run (else warns once)."""
    from lucidyolo.data.device_hsv import resolve_device_hsv
    from lucidyolo.engine.loop.datamodule import TrainingDataModule
    from lucidyolo.optim.recipe import auto_close_mosaic

    d, a = cfg.data, cfg.augment
    acc = cfg.trainer.accelerator.lower()
    accelerator = "cuda" if cuda else ("cpu" if acc == "auto" else acc)
    device_hsv = resolve_device_hsv(d.device_hsv, accelerator, cfg.trainer.precision, cfg.trainer.strategy)
    return TrainingDataModule(
        train, val, spec.fields, d.img_size, d.batch_size, variant=cfg.model.variant, seed=cfg.seed,
        epochs=cfg.trainer.max_epochs, close_mosaic=(
            auto_close_mosaic(cfg.trainer.max_epochs) if a.close_mosaic == "auto" else a.close_mosaic
        ),
        mosaic=a.use_mosaic,
        augment=a.as_overrides(), num_workers=None if d.num_workers == "auto" else d.num_workers,
        val_num_workers=d.val_num_workers, prefetch_factor=d.prefetch_factor,
        persistent_workers=d.persistent_workers, cache_train_images=d.cache_train_images, device_hsv=device_hsv,
        local_ranks=local_ranks(cfg, cuda), cpu_step=accelerator == "cpu",
    )


def local_ranks(cfg: RunConfig, cuda: bool) -> int:
    """Training processes per host (they share its /dev/shm): the devices per node, or ``LOCAL_WORLD_SIZE`` if larger."""
    from lucidyolo.data.shm import local_world_size

    count = device_count(cfg.trainer.devices)
    if count is None or count == -1:  # "auto" / -1 take every GPU, one CPU process
        import torch

        count = torch.cuda.device_count() if cuda else 1
    return max(1, count, local_world_size())


def global_processes(cfg: RunConfig, cuda: bool) -> int:
    """Training processes of the whole run, every node's: the global batch is ``batch_size`` x this.

    ``local_ranks x trainer.num_nodes``, or the launcher's ``WORLD_SIZE`` (torchrun, the environment-variable
    launch) when that is larger, so the learning rate and the schedule follow the global batch.
    """
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return max(local_ranks(cfg, cuda) * cfg.trainer.num_nodes, world, 1)


def resolve_schedule(cfg: RunConfig, train_images: int, ranks: int = 1) -> tuple[RunConfig, Any]:
    """The config with its ``auto`` schedule values resolved for this run, and the :class:`Recipe`.

    Optimizer steps per epoch follow the loader: ``ceil(images / (batch x ranks))``
    batches per rank, ``ceil(batches / accumulate_grad_batches)`` steps.
    """
    from lucidyolo.optim.recipe import resolve_recipe

    m, o, t = cfg.model, cfg.optim, cfg.trainer
    ranks = max(1, int(ranks))
    batches = max(1, math.ceil(train_images / (cfg.data.batch_size * ranks)))
    limit = t.limit_train_batches
    if isinstance(limit, float) and limit <= 1.0:  # Lightning: a fraction of the epoch
        batches = max(1, int(batches * limit))
    elif limit is not None:
        batches = min(batches, max(1, int(limit)))
    steps = max(1, math.ceil(batches / t.accumulate_grad_batches))
    recipe = resolve_recipe(
        lr=o.lr, lr_reference_batch=o.lr_reference_batch, lr_scaling=o.lr_scaling, warmup_epochs=o.warmup_epochs,
        ema_tau=cfg.ema.tau, close_mosaic=cfg.augment.close_mosaic, epochs=t.max_epochs, steps_per_epoch=steps,
        global_batch=cfg.data.batch_size * ranks * t.accumulate_grad_batches, finetune=m.weights is not None,
    )
    resolved = {
        "optim": o.model_copy(update={"lr_scaling": recipe.lr_scaling, "warmup_epochs": recipe.warmup_epochs}),
        "ema": cfg.ema.model_copy(update={"tau": recipe.ema_tau}),
        "augment": cfg.augment.model_copy(update={"close_mosaic": recipe.close_mosaic}),
    }
    return cfg.model_copy(update=resolved), recipe
