"""A published YOLO26 checkpoint as a lucid checkpoint: every command reads one the same way.

:func:`read_published_checkpoint` reads the publisher's file without running any
of it; this module finds the task that claims its model class
(:attr:`~lucidyolo.tasks.api.TaskSpec.published_models`), the variant from its
tensor shapes (the scale table), builds that task's lucid model for the file's
classes, loads every tensor one to one
(:func:`~lucidyolo.models.published_layout.load_published_state`) and returns
the checkpoint dict a lucid run would have written (``lucid`` section with the
config, class names and dataset meta; ``state_dict``). ``restore`` (eval,
predict, export, the Python API) and ``--model.weights`` (transfer) then need
no second path. The published files hold the EMA weights, so ``state_dict`` is
them and there is no separate EMA.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from lucidyolo.engine.weights.published_checkpoint import (
    PublishedCheckpoint,
    read_published_checkpoint,
)
from lucidyolo.errors import UserError

SOURCE_FORMAT = "published YOLO26 (.pt)"
"""``transfer.json``'s and the checkpoint's name for this format."""


def infer_variant(state: dict[str, Tensor]) -> str:
    """The scale-table row whose first conv width and stride-4 C3k2 depth match the file.

    Raises:
        UserError: no row matches (not a YOLO26 file, or a custom width).
    """
    from lucidyolo.models.scales import SCALES

    first = state.get("model.0.conv.weight")
    units = {name.split(".")[3] for name in state if name.startswith("model.2.m.")}
    for key, scale in SCALES.items():
        if first is not None and first.shape[0] == scale.channels(64) and len(units) == scale.repeats(2):
            return key
    width = None if first is None else int(first.shape[0])
    raise UserError(
        f"The checkpoint's first layer has {width} channels and its stride-4 block {len(units)} units, which is no "
        "YOLO26 variant.",
        why="lucid reads the published layouts n, s, m, l and x only.",
        fix="pass an unmodified published YOLO26 file (yolo26n.pt ... yolo26x.pt, with -seg, -obb or -pose).",
    )


def published_task(checkpoint: PublishedCheckpoint) -> Any:
    """The installed task whose ``published_models`` names the file's model class.

    Raises:
        UserError: no installed task reads that class.
    """
    from lucidyolo.tasks.registry import get_task, task_names

    for name in task_names():
        spec = get_task(name)
        if checkpoint.model_class in spec.published_models:
            return spec
    raise UserError(
        f"{checkpoint.path} is a published checkpoint of a {checkpoint.model_class}, which no installed lucid task reads.",
        why="lucid reads the published detection, segmentation, oriented-box and pose models.",
        fix="pass yolo26{n,s,m,l,x}.pt, -seg.pt, -obb.pt or -pose.pt (classification files are not read yet).",
    )


def published_as_lucid(path: str | Path) -> dict[str, Any]:
    """Read a published checkpoint and return it as a lucid checkpoint dict.

    Returns:
        ``{"lucid": {"config", "class_names", "dataset_meta", "format", "source"}, "state_dict": {"model.<name>": tensor}}``
        with the task's default config, the file's variant and training image size.

    Raises:
        UserError: unreadable, unsafe (refused before anything in it runs), or not a layout lucid reads.
    """
    from lucidyolo.config.resolve import validate_config
    from lucidyolo.models.published_layout import load_published_state, published_names

    checkpoint = read_published_checkpoint(Path(path))
    spec = published_task(checkpoint)
    variant = infer_variant(checkpoint.state)
    meta = dict(spec.published_meta(checkpoint)) if spec.published_meta is not None else {}
    raw: dict[str, Any] = {"model": {"task": spec.name, "variant": variant}}
    if checkpoint.img_size:
        raw["data"] = {"img_size": int(checkpoint.img_size)}
    cfg = validate_config(spec, raw, trains=False)
    num_classes = len(checkpoint.class_names)
    assert spec.build_model is not None
    model = spec.build_model(cfg=cfg.model, num_classes=num_classes, meta=meta)
    load_published_state(model, checkpoint.state, source=str(path))
    config = cfg.model_dump(mode="json")
    config["num_classes_resolved"] = num_classes
    return {
        "lucid": {
            "config": config, "class_names": list(checkpoint.class_names), "dataset_meta": meta, "format": 2,
            "source": {"format": SOURCE_FORMAT, "model_class": checkpoint.model_class, "task": spec.name,
                       "variant": variant, "img_size": checkpoint.img_size, "used_ema": checkpoint.used_ema,
                       "file": str(path), "names": published_names(model)},
        },
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
    }


def read_model_checkpoint(path: str | Path) -> dict[str, Any]:
    """A lucid checkpoint dict from a lucid file (:func:`~lucidyolo.engine.weights.checkpoint.load_checkpoint`) or a
    published YOLO26 file (:func:`published_as_lucid`); both refuse unsafe files before anything in them runs."""
    from lucidyolo.engine.weights.checkpoint import load_checkpoint
    from lucidyolo.engine.weights.published_checkpoint import is_published_checkpoint

    if Path(path).is_file() and is_published_checkpoint(Path(path)):
        return published_as_lucid(path)
    return load_checkpoint(path)
