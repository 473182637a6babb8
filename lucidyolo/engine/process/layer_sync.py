"""``trainer.sync_batchnorm``: Lightning's layer-sync plugin swapping in the global-batch BatchNorm.

Lightning applies a ``LayerSync`` plugin only under its multi-process strategies
(DDP), when fitting, before wrapping the model; one device never sees it. Its own
``TorchSyncBatchNorm`` converts to ``nn.SyncBatchNorm``, whose kernels are
CUDA-only, so a CPU (gloo) run could not use it:
:class:`~lucidyolo.models.sync_batchnorm.SyncBatchNorm2d` runs on every device.
"""

from __future__ import annotations

from pytorch_lightning.plugins.layer_sync import LayerSync
from torch.nn import Module

from lucidyolo.models.sync_batchnorm import convert_sync_batchnorm, revert_sync_batchnorm


class GlobalBatchNorm(LayerSync):
    """Convert every BatchNorm of the trained module to :class:`SyncBatchNorm2d` (same parameters and buffers)."""

    def apply(self, model: Module) -> Module:
        return convert_sync_batchnorm(model)

    def revert(self, model: Module) -> Module:
        return revert_sync_batchnorm(model)
