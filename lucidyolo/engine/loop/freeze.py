"""``--model.freeze``: keep the first modules of the trunk fixed, BatchNorm statistics included.

The trunk is the model's ``backbone`` then its ``neck`` (attributes of any
model, plugins included), split into modules in forward order: each child of
the two, a ``Sequential`` child split into its own children, modules without
parameters left out (YOLO26 n: 11 backbone modules, then 6 neck modules).
``backbone`` freezes the backbone's, ``neck`` the backbone's and the neck's, a
number ``N`` the first ``N``.

Frozen means: no gradient (``requires_grad`` off), so the optimizer never
steps them; their BatchNorm layers in eval mode, so the running statistics do
not move; and, as both stay put, the EMA of each frozen tensor stays equal to
it. Frozen for the whole run, the parameters are not even handed to the
optimizer. With ``freeze_epochs K`` they are in the optimizer from the start
(gradient-free tensors are skipped by its step) and get gradients again from
epoch ``K`` on, so the optimizer's parameter list, and an exact resume, do not
depend on the epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback
from torch import nn

from lucidyolo.errors import ConfigError


def trunk_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(qualified name, module)`` of the trunk in forward order (see the module docstring)."""
    out: list[tuple[str, nn.Module]] = []
    for part in ("backbone", "neck"):
        root = getattr(model, part, None)
        if not isinstance(root, nn.Module):
            continue
        for name, child in root.named_children():
            kids = list(child.named_children()) if isinstance(child, nn.Sequential) else [("", child)]
            for sub, module in kids:
                if any(True for _ in module.parameters()):
                    out.append((".".join(p for p in (part, name, sub) if p), module))
    return out


def frozen_modules(model: nn.Module, choice: str | int) -> list[tuple[str, nn.Module]]:
    """The modules ``--model.freeze choice`` keeps fixed (empty for ``none``).

    Raises:
        ConfigError: the model has no such part, or ``N`` exceeds the trunk's modules.
    """
    if choice == "none":
        return []
    trunk = trunk_modules(model)
    if choice == "backbone":
        picked = [(n, m) for n, m in trunk if n.startswith("backbone.")]
    elif choice == "neck":
        picked = trunk if any(n.startswith("neck.") for n, _ in trunk) else []
    else:
        count = int(choice)
        if count > len(trunk):
            raise ConfigError(
                f"`--model.freeze {count}` asks for more modules than the trunk has ({len(trunk)}).",
                fix=f"Use a number up to {len(trunk)}, or backbone / neck.",
            )
        picked = trunk[:count]
    if not picked:
        raise ConfigError(
            f"`--model.freeze {choice}`: this task's model has no {choice} to freeze.",
            fix="Use none, or a number of trunk modules.",
        )
    return picked


def describe(names: list[str], choice: str | int, epochs: int | None, total: int) -> str:
    """``frozen: backbone (11 modules, 1.21M parameters) for 2 epochs``."""
    what = f"first {choice} trunk modules" if isinstance(choice, int) else str(choice)
    when = f"for {epochs} epoch{'s' if epochs != 1 else ''}" if epochs else "for the whole run"
    return f"frozen: {what} ({len(names)} modules, {total / 1e6:.2f}M parameters) {when}"


class FreezeCallback(Callback):
    """Keeps the named modules of ``pl_module.model`` fixed for ``epochs`` epochs (None: always).

    Args:
        names: qualified module names (from :func:`frozen_modules`).
        epochs: epochs to keep them frozen, or None for the whole run.
        log: receives one line when they are released.
    """

    def __init__(self, names: list[str], epochs: int | None = None, log: Callable[[str], None] | None = None) -> None:
        self.names = list(names)
        self.epochs = epochs
        self.log = log
        self.modules: list[nn.Module] = []
        self.frozen = False

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        lookup = dict(pl_module.model.named_modules())
        self.modules = [lookup[n] for n in self.names]
        if self.epochs is None:  # before configure_optimizers: never handed to the optimizer
            self.set_frozen(True)

    def set_frozen(self, frozen: bool) -> None:
        for module in self.modules:
            for p in module.parameters():
                p.requires_grad_(not frozen)
        self.frozen = frozen

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        frozen = self.epochs is None or trainer.current_epoch < self.epochs
        if self.frozen and not frozen:
            for module in self.modules:
                module.train(pl_module.training)
            if self.log is not None:
                self.log(f"epoch {trainer.current_epoch}: released the {len(self.modules)} frozen modules")
        self.set_frozen(frozen)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        # Lightning puts the model back in train mode at each epoch start and after validation
        if self.frozen:
            for module in self.modules:
                module.eval()
