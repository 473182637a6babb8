"""The training system: composes model, objective, optimizer, schedule and the epoch metric.

The model (an ``nn.Module``) is not the system: this LightningModule owns the
step logic, logging and the optimizer; the model, the criterion, the decoder and
the metric are plain objects built by the task layer and passed in.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from lucidyolo.data.device_hsv import apply_device_hsv
from lucidyolo.optim.musgd import MuSGD, resolve_ns_dtype
from lucidyolo.optim.recipe import auto_warmup_epochs, scale_lr
from lucidyolo.optim.schedule import warmup_linear_schedule
from lucidyolo.structures.packed import PackedBatch, unpack


def _float32(device: torch.device) -> AbstractContextManager[Any]:
    """A context that turns autocast off on ``device`` (nothing where torch has no autocast for it)."""
    try:
        return torch.autocast(device.type, enabled=False)
    except RuntimeError:
        return nullcontext()


CHECKPOINT_FORMAT = 2
"""Version of the model layout in checkpoints: 2 is the published YOLO26 layout (1: lucid before issue 43)."""


class TrainingSystem(pl.LightningModule):
    """Train any task's dual-branch model with the progressive dual loss and MuSGD.

    Knows no task: what it logs comes from the criterion's terms and the task's
    metric keys; the metric is fed through the task's adapter.

    Args:
        model: maps images ``(B, 3, H, W)`` in ``[0, 1]`` to the task's output dict.
        criterion: ``criterion(outputs, gt, alpha) -> (total, terms)``; every top-level
            term is logged (``train/<term>_loss``, ``val/<term>_loss``, progress bar);
            keys with a ``/`` (``o2m/box``) are per-branch diagnostics and stay unlogged,
            so the loggers and the progress bar see only the task's declared terms.
        decode: the task's ``decode(outputs=, path=) -> Tensor`` hook.
        decode_path: the path validation (and the run folder's batch pictures) decode with:
            the first of the task's ``decode_paths``.
        metric: epoch metric; ``compute()`` returns ``metric_keys`` without ``val/``.
        metric_update: ``metric_update(metric=, outputs=, decoded=, gt=, batch_meta=)``.
        metric_keys: the logged epoch metric keys (``val/...``); the first ones are shown.
        config: the resolved run config as plain types (stored in every checkpoint).
        class_names: contiguous class names (stored in every checkpoint).
        dataset_meta: the task's dataset meta (``TaskSpec.meta_keys``; stored in every checkpoint).
        lr: peak lr at ``lr_reference_batch``; scaled with the global batch by ``lr_scaling``.
        lr_reference_batch: batch size at which ``lr`` applies.
        lr_scaling: ``linear``, ``none`` or ``auto`` (:func:`lucidyolo.optim.recipe.scale_lr`).
        lrf: final lr fraction.
        momentum, weight_decay: optimizer settings.
        warmup_epochs: linear warmup length in epochs (0 = none).
        optimizer: ``"musgd"`` or ``"sgd"`` (Nesterov SGD, the control arm).
        newton_schulz_dtype: MuSGD's iteration dtype, ``auto``, ``float32`` or ``bfloat16``
            (:func:`lucidyolo.optim.musgd.resolve_ns_dtype`, resolved on the training device).
        batch_size: per-device batch size.
        channels_last: use the channels-last memory format (CUDA and CPU; set by the engine).
    """

    def __init__(
        self,
        model: nn.Module,
        criterion: nn.Module,
        decode: Callable[..., Any],
        metric: nn.Module,
        metric_update: Callable[..., None],
        metric_keys: Sequence[str],
        config: dict[str, Any],
        *,
        decode_path: str,
        class_names: list[str] | None = None,
        dataset_meta: dict[str, Any] | None = None,
        lr: float = 0.01,
        lr_reference_batch: int = 64,
        lr_scaling: str = "linear",
        lrf: float = 0.01,
        momentum: float = 0.95,
        weight_decay: float = 5e-4,
        warmup_epochs: float = 3.0,
        optimizer: str = "musgd",
        newton_schulz_dtype: str = "float32",
        batch_size: int = 16,
        channels_last: bool = False,
    ) -> None:
        super().__init__()
        self.model = model
        self.criterion = criterion
        self.decode = decode
        self.decode_path = decode_path
        self.val_metric = metric
        self.metric_update = metric_update
        self.metric_keys = tuple(metric_keys)
        for key in self.metric_keys:
            # the epoch metric gathers every rank's matches itself; Lightning's advice to sync_dist (a mean of
            # the ranks' values) would be wrong advice for it, so it is not printed for these keys
            warnings.filterwarnings("ignore", message=re.escape(f"It is recommended to use `self.log({key!r}, ..., sync_dist=True)`"))
        self.config = config
        self.class_names = list(class_names or [])
        self.dataset_meta = dict(dataset_meta or {})
        self.lr = lr
        self.lr_reference_batch = lr_reference_batch
        self.lr_scaling = lr_scaling
        self.lrf = lrf
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.warmup_epochs = warmup_epochs
        self.optimizer_name = optimizer
        self.newton_schulz_dtype = newton_schulz_dtype
        self.batch_size = batch_size
        self.channels_last = channels_last
        self.alpha = self._epoch_weight(0, 1)
        self._objective: Callable[..., tuple[Tensor, dict[str, Tensor]]] = self.objective
        self._t_batch = 0.0

    # ---------------------------------------------------------------- objective
    def objective(self, images: Tensor, gt: dict[str, Tensor], alpha: float) -> tuple[Tensor, dict[str, Tensor]]:
        """Forward, both assignments and the dual loss: the region ``model.compile_step`` compiles."""
        outputs = self.model(images)
        return self.criterion(outputs, gt, alpha)

    def decode_outputs(self, outputs: Mapping[str, Any]) -> Any:
        """The task's decode of a forward's ``outputs`` on :attr:`decode_path` (e.g. ``(B, 300, 6)`` rows)."""
        return self.decode(outputs=outputs, path=self.decode_path)

    def use_compiled_objective(self, fn: Callable[..., tuple[Tensor, dict[str, Tensor]]]) -> None:
        """Swap in a compiled version of :meth:`objective` (the bound method, so state-dict keys stay)."""
        self._objective = fn

    # ---------------------------------------------------------------- hooks
    def on_train_epoch_start(self) -> None:
        # Set once per epoch from the epoch index, so a resumed run gets the same value.
        self.alpha = self._epoch_weight(self.current_epoch, int(self.trainer.max_epochs or 1))
        self._t_batch = time.perf_counter()

    def _epoch_weight(self, epoch: int, max_epochs: int) -> float:
        """The criterion's own schedule (the dual head's progressive o2m weight), else 1.0: the task owns it."""
        schedule = getattr(self.criterion, "epoch_weight", None)
        return float(schedule(epoch, max_epochs)) if callable(schedule) else 1.0

    def _to_input(self, images: Tensor) -> Tensor:
        return images.contiguous(memory_format=torch.channels_last) if self.channels_last else images

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        # Device HSV: the workers drew the gains, the colour transform runs here on the accelerator.
        return apply_device_hsv(batch) if isinstance(batch, PackedBatch) else batch

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        images, gt, _ = unpack(batch, self.device)
        total, terms = self._objective(self._to_input(images), gt, self.alpha)
        n = images.shape[0]
        shown = {k: v.detach() for k, v in terms.items() if "/" not in k}
        # step values for the progress bar (never synchronised: no collective per step) ...
        self.log_dict(shown, prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
        # ... and epoch means synchronised once across ranks at the end of the epoch
        self.log_dict(
            {f"train/{k}_loss": v for k, v in shown.items()}, on_step=False, on_epoch=True, batch_size=n, sync_dist=True
        )
        self.log("train/loss", total.detach(), on_step=False, on_epoch=True, batch_size=n, sync_dist=True)
        now = time.perf_counter()
        rate = n / max(now - self._t_batch, 1e-9)
        self._t_batch = now
        self.log("img/s", rate, prog_bar=True, on_step=True, on_epoch=False, batch_size=n)
        self.log("lr", float(self.trainer.optimizers[0].param_groups[0]["lr"]), prog_bar=True, on_step=True,
                 on_epoch=False, batch_size=n)
        self.log("alpha", self.alpha, on_step=False, on_epoch=True, batch_size=n, sync_dist=True)
        return total

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        images, gt, meta = unpack(batch, self.device)
        # Float32 whatever the training precision, the metric's own tensor work included (seg builds
        # its masks from coefficients x prototypes there): the epoch metric (and the best checkpoint it
        # picks) is then the number `lucid eval --no-fold` reproduces from the checkpoint.
        with _float32(self.device):
            outputs = self.model(self._to_input(images))
            _, terms = self.criterion(outputs, gt, self.alpha)
            decoded = self.decode_outputs(outputs)
            self.metric_update(metric=self.val_metric, outputs=outputs, decoded=decoded, gt=gt, batch_meta=meta)
        n = images.shape[0]
        self.log_dict(
            {f"val/{k}_loss": v for k, v in terms.items() if "/" not in k},
            on_step=False, on_epoch=True, batch_size=n, sync_dist=True,
        )

    def on_validation_epoch_end(self) -> None:
        # The metric gathers across ranks itself (or the task declares multi_device=False).
        result = self.val_metric.compute()
        for key in self.metric_keys:
            value = result[key.removeprefix("val/")]
            value = value.to(self.device) if isinstance(value, Tensor) else torch.tensor(float(value), device=self.device)
            self.log(key, value, prog_bar=True, sync_dist=False)
        self.val_metric.reset()

    # ---------------------------------------------------------------- optimizer
    def effective_lr(self) -> float:
        world = max(int(getattr(self.trainer, "world_size", 1) or 1), 1)
        accumulate = int(getattr(self.trainer, "accumulate_grad_batches", 1) or 1)
        return scale_lr(self.lr, self.batch_size * world * accumulate, self.lr_reference_batch, self.lr_scaling)[0]

    def configure_optimizers(self) -> dict[str, Any]:
        lr = self.effective_lr()
        # The objective may own trained parameters too (a keypoint flow): they step with the model.
        # by identity: a criterion may read a module of the model (the keypoint flow) and share its parameters
        params = list({id(p): p for m in (self.model, self.criterion) for p in m.parameters() if p.requires_grad}.values())
        if self.optimizer_name == "musgd":
            ns_dtype = resolve_ns_dtype(self.newton_schulz_dtype, self.device)
            opt: torch.optim.Optimizer = MuSGD(
                params, lr=lr, momentum=self.momentum, weight_decay=self.weight_decay, ns_dtype=ns_dtype
            )
        else:
            decay = [p for p in params if p.ndim >= 2]
            no_decay = [p for p in params if p.ndim < 2]
            opt = torch.optim.SGD(
                [{"params": decay, "weight_decay": self.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                lr=lr, momentum=self.momentum, nesterov=True,
            )
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        per_epoch = max(total // max(int(self.trainer.max_epochs or 1), 1), 1)
        epochs = self.warmup_epochs if self.warmup_epochs != "auto" else auto_warmup_epochs(total, per_epoch)
        warmup = min(int(round(epochs * per_epoch)), max(total - 1, 0))
        sched = warmup_linear_schedule(opt, warmup_steps=warmup, total_steps=total, lrf=self.lrf)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step", "frequency": 1}}

    # ---------------------------------------------------------------- checkpoint
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["lucid"] = {
            "config": self.config, "class_names": self.class_names, "dataset_meta": self.dataset_meta,
            "alpha": float(self.alpha), "format": CHECKPOINT_FORMAT,
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.alpha = float(checkpoint.get("lucid", {}).get("alpha", self.alpha))
