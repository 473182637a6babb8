"""A det checkpoint of an untrained nano model whose run trained at 64 px, beside a 64 px synthetic set (no training)."""

from __future__ import annotations

from pathlib import Path

from tests.task_fields import fields_of

IMG_SIZE = 64


def write_tiny_run(base: Path, task: str = "det") -> tuple[Path, Path]:
    """``(checkpoint, data_root)``: the checkpoint's config says ``data.img_size`` 64 and points at the data.

    ``task`` is a task whose model needs no dataset meta (det, seg, obb); det's model is
    ``create_model("n")`` exactly, other tasks' their ``build_model`` at variant n.
    """
    import torch

    from lucidyolo.data.synth import SHAPE_CLASSES, write_synthetic
    from lucidyolo.models import create_model
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    root = write_synthetic(base / "data", fields_of(task), 6, img_size=IMG_SIZE, seed=0)
    torch.manual_seed(0)
    if spec.name == "det":
        model = create_model("n", num_classes=len(SHAPE_CLASSES))
    else:
        cfg = spec.config_model.model_validate({"task": spec.name})
        model = spec.build_model(cfg=cfg, num_classes=len(SHAPE_CLASSES), meta={})
    config = spec.run_config.model_validate({"model": {"task": spec.name}}).model_dump(mode="json")
    config["data"].update(img_size=IMG_SIZE, data_root=str(root))
    config["num_classes_resolved"] = len(SHAPE_CLASSES)
    ckpt = base / "run.ckpt"
    torch.save({
        "lucid": {"config": config, "class_names": list(SHAPE_CLASSES), "dataset_meta": {}, "format": 2},
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
    }, ckpt)
    return ckpt, root
