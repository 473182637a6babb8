"""A det checkpoint of an untrained nano model whose run trained at 64 px, beside a 64 px synthetic set (no training)."""

from __future__ import annotations

from pathlib import Path

from tests.task_fields import fields_of

IMG_SIZE = 64


def write_tiny_run(base: Path) -> tuple[Path, Path]:
    """``(checkpoint, data_root)``: the checkpoint's config says ``data.img_size`` 64 and points at the data."""
    import torch

    from lucidyolo.config.schema import RunConfig
    from lucidyolo.data.synth import SHAPE_CLASSES, write_synthetic
    from lucidyolo.models import create_model

    root = write_synthetic(base / "data", fields_of("det"), 6, img_size=IMG_SIZE, seed=0)
    torch.manual_seed(0)
    model = create_model("n", num_classes=len(SHAPE_CLASSES))
    config = RunConfig().model_dump(mode="json")
    config["data"].update(img_size=IMG_SIZE, data_root=str(root))
    config["num_classes_resolved"] = len(SHAPE_CLASSES)
    ckpt = base / "run.ckpt"
    torch.save({
        "lucid": {"config": config, "class_names": list(SHAPE_CLASSES), "dataset_meta": {}, "format": 1},
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
    }, ckpt)
    return ckpt, root
