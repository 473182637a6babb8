"""The run folder's batch images: what augmentation made of the first training batches, and validation
batches with their labels beside the model's predictions.

``train_batch{i}.jpg`` holds the first ``data.plot_batches`` training batches of
the fit's first epoch as the network saw them (mosaic, affine, flips, colour
jitter applied) with their targets drawn; ``val_batch{i}_labels.jpg`` and
``val_batch{i}_pred.jpg`` the first validation batches with their targets and
with the predictions at :data:`PRED_CONF`. Everything is drawn by the task's
own hooks: ``target_rows`` turns the ground truth into ``draw``'s dicts,
``predict`` the decoded output, ``draw`` draws either.

Cost (issue 31 item 6: under 5 % of the embedded default run): the training
and validation steps are untouched. The callback looks at a batch only when its
index is below ``plot_batches`` in the fit's first epoch (train) or in the first
and the last validated epoch (val; the only places the extra forward pass of
the predictions runs); it copies what it needs on the spot (a loader may reuse
a batch's shared memory) and hands the drawing and JPEG encoding to one
background thread, so the training loop never waits on PIL. Validation is
drawn twice so a long run shows its predictions early and the final ones at the
end (the last epoch's files replace the first's).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from PIL import Image
from pytorch_lightning.callbacks import Callback

from lucidyolo.atomic_write import atomic_open
from lucidyolo.structures.packed import unpack

GRID_MAX_IMAGES = 16
"""Images of a batch shown in its picture (a 4 x 4 grid at most): enough to judge the augmentation."""

GRID_MAX_SIDE = 1920
"""Largest side of a batch picture in pixels; tiles are scaled down to fit (a 640 px batch: 480 px tiles)."""

PRED_CONF = 0.25
"""Predictions drawn at or above this score (``lucid predict``'s default)."""

JPEG_QUALITY = 85

BACKGROUND = (114, 114, 114)
"""The letterbox grey between tiles."""


def to_uint8_hwc(images: torch.Tensor) -> np.ndarray:
    """``(B, 3, S, S)`` float in ``[0, 1]`` -> ``(B, S, S, 3)`` uint8 (numpy, the CPU)."""
    return (
        (images.detach().float() * 255.0)
        .round_()
        .clamp_(0, 255)
        .to(torch.uint8)
        .permute(0, 2, 3, 1)
        .cpu()
        .numpy()
    )


def grid(tiles: Sequence[Image.Image], max_side: int = GRID_MAX_SIDE) -> Image.Image:
    """Square-ish grid of equally sized tiles (row-major), each scaled down so the grid fits ``max_side``."""
    n = len(tiles)
    cols = max(1, math.ceil(math.sqrt(n)))
    rows = max(1, math.ceil(n / cols))
    w, h = tiles[0].size if tiles else (32, 32)
    scale = min(1.0, max_side / (cols * max(w, h)))
    tw, th = max(1, int(w * scale)), max(1, int(h * scale))
    canvas = Image.new("RGB", (cols * tw, rows * th), BACKGROUND)
    for k, tile in enumerate(tiles):
        if tile.size != (tw, th):
            tile = tile.resize((tw, th), Image.Resampling.BILINEAR)
        canvas.paste(tile, ((k % cols) * tw, (k // cols) * th))
    return canvas


def draw_batch(
    images: np.ndarray,
    rows: Sequence[Sequence[Mapping[str, Any]]],
    draw: Callable[..., Any],
    class_names: Sequence[str],
    meta: Mapping[str, Any],
) -> Image.Image:
    """One picture of a batch: ``images (B, S, S, 3)`` uint8, each drawn with its ``rows`` by the task's ``draw``."""
    tiles = [
        draw(
            image=np.ascontiguousarray(img),
            predictions=list(r),
            class_names=class_names,
            meta=dict(meta),
        )
        for img, r in zip(images, rows, strict=True)
    ]
    return grid([t.convert("RGB") for t in tiles])


def save_jpeg(picture: Image.Image, path: Path) -> None:
    """Written atomically: a run folder never holds half a picture."""
    with atomic_open(path, "wb") as f:
        picture.save(f, format="JPEG", quality=JPEG_QUALITY)


def _lowest_priority() -> None:
    """Drawing yields the CPU to training: the drawing thread gets the lowest scheduling priority (Linux
    schedules threads one by one; elsewhere, or where refused, it keeps the process's)."""
    import contextlib
    import os
    import threading

    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class BatchImages(Callback):
    """Writes the run folder's batch images (global rank 0 only); see the module docstring.

    Args:
        run_dir: the run folder.
        count: ``data.plot_batches``, batches of each kind (> 0).
        draw, target_rows, predict: the task's hooks.
        class_names: contiguous class names.
        meta: the dataset meta handed to the hooks (``flip_idx``, ``skeleton``).
    """

    def __init__(
        self,
        run_dir: Path,
        count: int,
        *,
        draw: Callable[..., Any],
        target_rows: Callable[..., Any],
        predict: Callable[..., Any] | None,
        class_names: Sequence[str],
        meta: Mapping[str, Any],
    ) -> None:
        self.run_dir = Path(run_dir)
        self.count = int(count)
        self.draw = draw
        self.target_rows = target_rows
        self.predict = predict
        self.class_names = list(class_names)
        self.meta = dict(meta)
        self._train_epoch: int | None = None
        self._validated = False
        self._val_now = False
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: list[Future[None]] = []

    # ------------------------------------------------------------ what the loop calls
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._train_epoch = int(trainer.current_epoch)  # a resumed fit draws its own first epoch

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if (
            batch_idx >= self.count
            or trainer.current_epoch != self._train_epoch
            or not trainer.is_global_zero
        ):
            return
        images, gt = self._copy(batch)
        self._submit(self._write_labels, images, gt, self.run_dir / f"train_batch{batch_idx}.jpg")

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        last = trainer.current_epoch + 1 >= int(trainer.max_epochs or 0)
        self._val_now = (
            not trainer.sanity_checking and trainer.is_global_zero and (not self._validated or last)
        )

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if batch_idx >= self.count or not self._val_now:
            return
        images, gt = self._copy(batch)
        self._submit(
            self._write_labels, images, gt, self.run_dir / f"val_batch{batch_idx}_labels.jpg"
        )
        if self.predict is not None:
            model, decode = pl_module.model, pl_module.decode_outputs  # type: ignore[attr-defined]
            with (
                torch.inference_mode()
            ):  # the model the validation step scored (the EMA weights when on), decoded as it decodes
                x = unpack(batch)[0][:GRID_MAX_IMAGES]  # on the batch's own device
                decoded = decode(model(x)).cpu()
            self._submit(
                self._write_predictions,
                images,
                decoded,
                self.run_dir / f"val_batch{batch_idx}_pred.jpg",
            )

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._val_now:
            self._validated = True
            self._val_now = False

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.finish()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def finish(self) -> None:
        """Wait for the pictures still being drawn; a failed one is a warning, never a failed run."""
        if self._pool is None:
            return
        self._pool.shutdown(wait=True)
        self._pool = None
        for job in self._jobs:
            if (exc := job.exception()) is not None:
                warnings.warn(
                    f"a batch image could not be written: {type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._jobs.clear()

    # ------------------------------------------------------------ helpers
    @staticmethod
    def _copy(batch: Any) -> tuple[np.ndarray, dict[str, torch.Tensor]]:
        """The first images as ``(b, S, S, 3)`` uint8 and the whole ground truth, copied to the CPU now: the
        loader may reuse the batch's memory once the step is done."""
        images, gt, _ = unpack(batch, "cpu", non_blocking=False)
        return to_uint8_hwc(images[:GRID_MAX_IMAGES]), {k: v.clone() for k, v in gt.items()}

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="lucid-batch-images", initializer=_lowest_priority
            )
        self._jobs.append(self._pool.submit(fn, *args))

    def _write_labels(self, images: np.ndarray, gt: dict[str, torch.Tensor], path: Path) -> None:
        s = images.shape[1:3]
        rows = self.target_rows(
            gt=gt, image_hw=(int(s[0]), int(s[1])), class_names=self.class_names, meta=self.meta
        )
        save_jpeg(
            draw_batch(images, rows[: len(images)], self.draw, self.class_names, self.meta), path
        )

    def _write_predictions(self, images: np.ndarray, decoded: Any, path: Path) -> None:
        assert self.predict is not None
        s = (int(images.shape[1]), int(images.shape[2]))
        rows = [
            self.predict(
                decoded=decoded[i],
                image_hw=s,
                letterbox=(1.0, 0.0, 0.0),
                class_names=self.class_names,
                conf=PRED_CONF,
                meta=self.meta,
            )
            for i in range(len(images))
        ]
        save_jpeg(draw_batch(images, rows, self.draw, self.class_names, self.meta), path)


def batch_images_callback(
    plot_batches: int,
    run_dir: Path,
    *,
    draw: Callable[..., Any] | None,
    target_rows: Callable[..., Any] | None,
    predict: Callable[..., Any] | None,
    class_names: Sequence[str],
    meta: Mapping[str, Any],
) -> BatchImages | None:
    """The callback of ``data.plot_batches`` (``None`` when 0, or when the task cannot draw its targets)."""
    if plot_batches <= 0 or draw is None or target_rows is None:
        return None
    return BatchImages(
        run_dir,
        plot_batches,
        draw=draw,
        target_rows=target_rows,
        predict=predict,
        class_names=class_names,
        meta=meta,
    )
