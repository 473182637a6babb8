"""``lucid model summary --task T``: a task's model measured through its own ``build_model`` hook."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lucidyolo.errors import ConfigError, NotAvailableError


def task_model_summary(task: str, variant: str, num_classes: int, img_size: int) -> dict[str, Any]:
    """Size figures (see :func:`lucidyolo.models.summary.model_summary`) of ``task``'s ``variant``."""
    from lucidyolo.models.summary import model_summary
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    if spec.build_model is None:
        raise NotAvailableError(
            f"Task {spec.name!r} has no model yet: its plugin does not provide build_model.", fix="Nothing was run."
        )
    try:
        cfg = spec.config_model.model_validate({"task": spec.name, "variant": variant})
    except ValidationError as exc:
        raise ConfigError(
            f"The {spec.name} model needs options this command does not take: {exc.errors()[0]['msg']}.",
            fix="Use `lucid fit ... --print-config` to see the task's model options.",
        ) from None
    build = spec.build_model
    info = model_summary(
        variant, num_classes, img_size, build=lambda: build(cfg=cfg, num_classes=num_classes, meta=dict(spec.reference_meta))
    )
    info["task"] = spec.name
    return info
