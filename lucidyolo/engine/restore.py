"""Rebuild a trained model from a checkpoint (every command reads checkpoints through here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from lucidyolo.config.resolve import run_config_class
from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.checkpoint import load_checkpoint
from lucidyolo.errors import ConfigError, UserError
from lucidyolo.tasks.api import TaskSpec


@dataclass
class Restored:
    """A model restored from a checkpoint with everything needed to use it."""

    spec: TaskSpec
    config: RunConfig
    model: nn.Module
    num_classes: int
    used_ema: bool
    checkpoint: dict[str, Any]
    dataset_meta: dict[str, Any]


def restore(path: Path, ema: bool = True, task: str | None = None) -> Restored:
    """Load ``path`` safely (``weights_only``), rebuild the task's model and load its weights.

    Args:
        path: checkpoint written by ``lucid fit``.
        ema: load the EMA weights when the checkpoint has them.
        task: if given, must match the checkpoint's task.

    Raises:
        UserError: unsafe or foreign checkpoint, task mismatch, weights that do not fit.
    """
    from lucidyolo.tasks.registry import get_task

    ckpt = load_checkpoint(path)
    lucid = ckpt.get("lucid") if isinstance(ckpt, dict) else None
    if not isinstance(lucid, dict) or "config" not in lucid:
        raise UserError(
            f"{path} is not a lucid checkpoint (no 'lucid' section).",
            fix="Pass a checkpoint written by `lucid fit` (runs/<task>/version_N/checkpoints/*.ckpt).",
        )
    raw = dict(lucid["config"])
    num_classes = int(raw.pop("num_classes_resolved"))
    spec = get_task(str(raw["model"]["task"]))
    if task is not None and get_task(task).name != spec.name:
        raise ConfigError(
            f"--task {task} contradicts the checkpoint, which was trained for {spec.name!r}.",
            why="scoring a model with another task's protocol gives a meaningless number.",
            fix="Drop --task (the checkpoint knows its task).",
        )
    cfg = run_config_class(spec).model_validate(raw)
    if spec.build_model is None:
        raise UserError(
            f"Task {spec.name!r} provides no build_model hook; its checkpoints cannot be loaded.",
            fix="Install the plugin release that wrote the checkpoint.",
        )
    meta = dict(lucid.get("dataset_meta") or {})
    model = spec.build_model(cfg=cfg.model, num_classes=num_classes, meta=meta)
    state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    used_ema = False
    if ema and isinstance(ckpt.get("lucid_ema"), dict):
        state.update(ckpt["lucid_ema"]["shadow"])
        used_ema = True
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise UserError(
            f"The weights in {path} do not fit the {cfg.model.variant!r} {spec.name} model: {str(exc)[:300]}",
            fix="Use the lucidyolo version that wrote the checkpoint.",
        ) from exc
    model.eval()
    return Restored(spec, cfg, model, num_classes, used_ema, ckpt, meta)
