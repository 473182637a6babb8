"""The DataModule: sources -> train/val datasets -> guarded loaders (one per rank)."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl

from lucidyolo.data.augment.pipeline import strengths_for_variant
from lucidyolo.data.datasets import TrainDataset, ValDataset
from lucidyolo.data.loader import build_train_loader, build_val_loader
from lucidyolo.data.source import ImageSource
from lucidyolo.data.worker_plan import WorkerPlan, largest_batch_nbytes, plan_workers


class TrainingDataModule(pl.LightningDataModule):
    """Training and validation loaders over two :class:`ImageSource` splits.

    Args:
        train_source, val_source: the splits.
        fields: the task's instance fields beyond boxes/labels/difficult (fix the packed tensor set).
        img_size: network input side S.
        batch_size: per-device batch size.
        variant: model variant (augmentation strengths).
        seed: run seed.
        epochs: total epochs (close-mosaic switch).
        close_mosaic: final epochs without mosaic.
        mosaic: False disables mosaic for the whole run.
        augment: strength overrides (field name -> value).
        num_workers: ``None`` = automatic (budgeted against /dev/shm with validation).
        val_num_workers: explicit validation pool size (``None``: follow the training count).
        local_ranks: training processes on this host (they share /dev/shm); ``None`` = ``LOCAL_WORLD_SIZE``.
        prefetch_factor, persistent_workers: DataLoader settings.
        cpu_step: the training step runs on the CPU (fewer automatic workers; see
            :func:`~lucidyolo.data.worker_plan.wanted_workers`).
        cache_train_images: decode training images once into RAM (``"auto"``: when the split is small).
        device_hsv: colour jitter on the accelerator.
        val_batch_size: validation batch size (default: ``batch_size``).
    """

    def __init__(
        self,
        train_source: ImageSource,
        val_source: ImageSource,
        fields: tuple[str, ...],
        img_size: int,
        batch_size: int,
        *,
        variant: str = "n",
        seed: int = 0,
        epochs: int | None = None,
        close_mosaic: int = 10,
        mosaic: bool = True,
        augment: dict[str, float] | None = None,
        num_workers: int | None = None,
        val_num_workers: int | None = None,
        prefetch_factor: int = 2,
        persistent_workers: bool = False,
        cpu_step: bool = False,
        cache_train_images: bool | str = False,
        device_hsv: bool = False,
        val_batch_size: int | None = None,
        local_ranks: int | None = None,
    ) -> None:
        super().__init__()
        self.train_source = train_source
        self.val_source = val_source
        self.fields = tuple(fields)
        self.img_size = img_size
        self.batch_size = batch_size
        self.val_batch_size = val_batch_size or batch_size
        self.variant = variant
        self.seed = seed
        self.epochs = epochs
        self.close_mosaic = close_mosaic if mosaic else (epochs or 0)
        overrides = dict(augment or {})
        if not mosaic:
            overrides["mosaic"] = 0.0
        self.strengths = strengths_for_variant(variant, **overrides)
        self.num_workers = num_workers
        self.val_num_workers = val_num_workers
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.cpu_step = cpu_step
        self.cache_train_images = cache_train_images
        self.device_hsv = device_hsv
        self.train_dataset: TrainDataset | None = None
        self.val_dataset: ValDataset | None = None
        self.local_ranks = local_ranks
        self._plan: WorkerPlan | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_dataset is None and stage in (None, "fit"):
            self.train_dataset = TrainDataset(
                self.train_source, self.img_size, self.variant, self.seed, epochs=self.epochs,
                close_mosaic=self.close_mosaic, strengths=self.strengths, device_hsv=self.device_hsv,
                cache_images=self.cache_train_images,
            )
        if self.val_dataset is None:
            self.val_dataset = ValDataset(self.val_source, self.img_size)

    def _rank_world(self) -> tuple[int, int]:
        trainer: Any = getattr(self, "trainer", None)
        if trainer is None:
            return 0, 1
        return int(trainer.global_rank), int(trainer.world_size)

    def worker_plan(self) -> WorkerPlan:
        """Training and validation worker counts, planned once per run against /dev/shm (both pools at once).

        Raises:
            UserError: a named count whose batches cannot fit the free /dev/shm.
        """
        if self._plan is None:
            st = self.strengths
            train_bytes = largest_batch_nbytes(
                self.train_source, self.fields, self.batch_size, self.img_size, train=True, mosaic=st.mosaic > 0,
                mixup=st.mixup > 0, copy_paste=st.copy_paste > 0, float_images=self.device_hsv,
            )
            val_bytes = largest_batch_nbytes(self.val_source, self.fields, self.val_batch_size, self.img_size, train=False)
            self._plan = plan_workers(
                self.num_workers, self.val_num_workers, batch_size=self.batch_size, train_batch_bytes=train_bytes,
                val_batch_bytes=val_bytes, prefetch_factor=self.prefetch_factor, ranks=self.local_ranks,
                cpu_step=self.cpu_step, batches_per_epoch=max(1, len(self.train_source) // max(1, self.batch_size)),
            )
        return self._plan

    def train_dataloader(self) -> Any:
        assert self.train_dataset is not None
        rank, world = self._rank_world()
        return build_train_loader(
            self.train_dataset, self.batch_size, self.fields, num_workers=self.worker_plan().train,
            prefetch_factor=self.prefetch_factor, persistent_workers=self.persistent_workers,
            seed=self.seed, rank=rank, world_size=world,
        )

    def val_dataloader(self) -> Any:
        assert self.val_dataset is not None
        rank, world = self._rank_world()
        return build_val_loader(
            self.val_dataset, self.val_batch_size, self.fields, val_num_workers=self.worker_plan().val,
            prefetch_factor=self.prefetch_factor, rank=rank, world_size=world,
        )
