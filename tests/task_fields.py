"""Tests name tasks; the data layer takes fields: resolve them through the registry, as the engine does."""

from __future__ import annotations

from lucidyolo.tasks.registry import get_task


def fields_of(task: str) -> tuple[str, ...]:
    """The instance fields the task ``task`` (name or alias) declares."""
    return get_task(task).fields
