"""Rebuild a trained model from a checkpoint (every command reads checkpoints through here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from lucidyolo.config.resolve import validate_config
from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.weights.published_weights import read_model_checkpoint
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
        path: checkpoint written by ``lucid fit``, a weights file from ``lucid export --format weights``,
            or a run directory (its ``best.ckpt``, else ``last.ckpt``).
        ema: load the EMA weights when the checkpoint has them.
        task: if given, must match the checkpoint's task.

    Raises:
        UserError: unsafe or foreign checkpoint, task mismatch, weights that do not fit.
    """
    from lucidyolo.engine.weights.weights_source import checkpoint_file
    from lucidyolo.tasks.registry import get_task

    path = checkpoint_file(path)
    ckpt = read_model_checkpoint(path)
    lucid = ckpt.get("lucid") if isinstance(ckpt, dict) else None
    if not isinstance(lucid, dict) or "config" not in lucid:
        raise UserError(
            f"{path} is not a lucid checkpoint (no 'lucid' section).",
            fix="Pass a checkpoint written by `lucid fit` (runs/<task>/version_N/checkpoints/*.ckpt).",
        )
    if int(lucid.get("format", 1)) < 2:
        raise UserError(
            f"{path} was written by a lucid release before the published YOLO26 layout (checkpoint format "
            f"{lucid.get('format', 1)}).",
            why="the model's layers changed to the published layout's widths; those tensors have other shapes.",
            fix="use it with the lucid release that trained it (e.g. `lucid export --format onnx` there), or retrain.",
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
    # Restoring never trains: the single-process rule brings a config that asks for several devices to one
    # instead of refusing to evaluate the model (docs/DECISIONS.md, "Config rules in the schema").
    cfg = validate_config(spec, raw, trains=False)
    if spec.build_model is None:
        raise UserError(
            f"Task {spec.name!r} provides no build_model hook; its checkpoints cannot be loaded.",
            fix="Install the plugin release that wrote the checkpoint.",
        )
    meta = dict(lucid.get("dataset_meta") or {})
    model = spec.build_model(cfg=cfg.model, num_classes=num_classes, meta=meta)
    state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    # a published file's weights are its publisher's EMA average (the release format keeps only those)
    used_ema = isinstance(lucid.get("source"), dict)
    if ema and isinstance(ckpt.get("lucid_ema"), dict):
        state.update(ckpt["lucid_ema"]["shadow"])
        used_ema = True
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise UserError(
            f"The weights in {path} do not fit the {cfg.model.variant!r} {spec.name} model its config describes: "
            f"{describe_mismatch(model.state_dict(), state)}.",
            why=("the checkpoint's config and its tensors disagree: the tensors belong to another task's or "
                 "variant's model (the file was assembled or edited after training), or to another lucidyolo "
                 "release whose model had other layers."),
            fix=(f"Use the checkpoint with the task that trained it (every command reads the task, here "
                 f"{spec.name!r}, from the checkpoint's config); if the config was edited, restore it; a checkpoint "
                 "of an older release loads with that release."),
        ) from exc
    model.eval()
    return Restored(spec, cfg, model, num_classes, used_ema, ckpt, meta)


def describe_mismatch(expected: dict[str, Any], got: dict[str, Any], examples: int = 2) -> str:
    """``'3 tensors missing (e.g. a, b), 1 unexpected (e.g. c), 1 of another shape (e.g. d: 4x8 in the file, 5x8 in the model)'``."""
    missing = [k for k in expected if k not in got]
    unexpected = [k for k in got if k not in expected]
    shaped = [k for k in expected if k in got and tuple(got[k].shape) != tuple(expected[k].shape)]
    dims = lambda t: "x".join(map(str, t.shape)) or "scalar"  # noqa: E731
    parts = []
    if missing:
        parts.append(f"{len(missing)} tensors missing (e.g. {', '.join(missing[:examples])})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected (e.g. {', '.join(unexpected[:examples])})")
    if shaped:
        parts.append(f"{len(shaped)} of another shape (e.g. "
                     + ", ".join(f"{k}: {dims(got[k])} in the file, {dims(expected[k])} in the model" for k in shaped[:examples])
                     + ")")
    return "; ".join(parts) or "the state dict was refused"
