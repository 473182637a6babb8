"""The warnings and log lines lucid knows are harmless, silenced one by one (never all) for every command.

Torch-free; its own module so that every command (fit, eval, predict, export) can call it without
importing the training loop.
"""

from __future__ import annotations

import warnings

_LEAF_SPEC = r".*LeafSpec.*"


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
    # the system moves and unpacks batches itself (on_after_batch_transfer); the datamodule only loads them
    warnings.filterwarnings("ignore", message=r"You have overridden `on_after_batch_transfer` in `LightningModule`.*")


def quiet_lightning_logs(verbose: bool = False) -> None:
    """Lightning's info lines (GPU available, tips) only when ``verbose``."""
    import logging

    level = logging.INFO if verbose else logging.WARNING
    for name in ("pytorch_lightning", "lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(level)
