"""SIGINT and SIGTERM stop a run at once, wherever the main thread is waiting.

Lightning's own SIGTERM handler only sets a flag that its loops read after the
current batch, and a flag is never read while the main thread waits on a
loader that will not deliver (issue 15: a run blocked on a failed worker
ignored SIGTERM for 13 minutes). A handler that raises interrupts that wait
(the ``poll`` returns EINTR and Python runs the handler), and the exception
takes Lightning's exception path: ``on_exception`` hooks, teardown (the
loader workers are stopped), re-raise to the CLI.
"""

from __future__ import annotations

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback

from lucidyolo.signals import STOP_SIGNALS, stop_on_signals

__all__ = ["STOP_SIGNALS", "StopLoadersOnException", "stop_on_signals"]


class StopLoadersOnException(Callback):
    """Stops the loader workers as soon as a run fails or is interrupted.

    Lightning calls ``on_exception`` before its teardown; stopping the workers
    here, each given :data:`~lucidyolo.data.loader.STOP_GRACE_S`, keeps a
    worker stuck in a batch from holding the exit for torch's 5 s per worker.
    """

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        from lucidyolo.data.loader import stop_all_loaders

        stop_all_loaders()
