"""Old import path of :mod:`lucidyolo.engine.weights.published_checkpoint`, kept for plugins written
before 1.0 (the plugin API documentation named it for ``PublishedCheckpoint``); it goes in the next major
version."""

from lucidyolo.engine.weights.published_checkpoint import (
    PUBLISHER_PACKAGE,
    PickledRecord,
    PublishedCheckpoint,
    is_published_checkpoint,
    read_published_checkpoint,
)

__all__ = ["PUBLISHER_PACKAGE", "PickledRecord", "PublishedCheckpoint", "is_published_checkpoint", "read_published_checkpoint"]
