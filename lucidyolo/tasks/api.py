"""The task plugin API.

A task (built-in or third party) is one :class:`TaskSpec` object exposed through
an entry point in the group ``lucidyolo.tasks``::

    [project.entry-points."lucidyolo.tasks"]
    mytask = "my_package.task:SPEC"

The entry-point name must equal ``TaskSpec.name``. Importing the module that
holds the spec must be cheap (no torch at import time): ``lucid --help`` and
``lucid plugins`` load specs. Factories import their heavy dependencies inside
their bodies.

Hook contracts (every hook is optional; ``None`` means "this task does not
provide it (yet)" and the commands that need it refuse with exit code 2):

``build_model(cfg, num_classes) -> torch.nn.Module``
    ``cfg`` is the task's validated :class:`~lucidyolo.config.schema.ModelConfig`
    subclass. The module maps images ``(B, 3, H, W)`` float in ``[0, 1]`` to the
    output dict of ``docs/ARCHITECTURE.md``: ``{"o2m": {...}, "o2o": {...},
    "anchors": (A, 2), "strides": (A,)}`` with ``boxes (B, A, 4)`` raw ltrb in
    stride units and ``logits (B, A, C)`` per branch, plus task keys.

``build_criterion(cfg, num_classes) -> torch.nn.Module``
    ``criterion(outputs, gt, alpha) -> (total, terms)``: ``outputs`` as above,
    ``gt`` the padded ground truth (``boxes (B, M, 4)`` xyxy px, ``labels (B, M)``,
    ``mask (B, M)`` bool, plus task fields), ``alpha`` the progressive o2m weight;
    ``total`` a scalar tensor, ``terms`` a dict of scalar tensors (before gains).

``decode(outputs, path) -> torch.Tensor``
    ``path`` is ``"e2e"`` (o2o top-k) or ``"nms"`` (o2m + NMS); returns ``(B, 300, 6)``
    ``[x1, y1, x2, y2, score, class]`` (rotated tasks ``(B, 300, 7)``), zero-score
    rows as padding.

``make_synthetic(out_dir, num_images, img_size, seed) -> pathlib.Path``
    Writes the task's synthetic shapes set (real image files + labels) and returns
    a dataset root the task's readers accept. Used by the gate and the embedded
    default run.

``build_metric(num_classes) -> torchmetrics.Metric``
    The epoch metric whose ``compute()`` returns the keys in
    ``capabilities.metric_keys``.

``draw(image, detections, class_names) -> numpy.ndarray``
    Draws predictions on an ``(H, W, 3)`` uint8 image (predict ``--save``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lucidyolo.config.schema import ModelConfig

PLUGIN_API_VERSION = 1
"""Bumped on any incompatible change to :class:`TaskSpec` or a hook contract."""

TASK_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class TaskCapabilities:
    """What a task can do; cross-field config rules are driven by these, never by task names.

    Attributes:
        multi_device: False when the epoch metric cannot be gathered across ranks;
            such a task refuses ``trainer.devices`` other than 1 and multi-process
            strategies.
        export: the deployed graph exports to ONNX.
        metric_keys: the epoch metric names the task logs (e.g. ``val/mAP50-95``).
    """

    multi_device: bool = True
    export: bool = True
    metric_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskSpec:
    """A task plugin: its name, config model, capabilities and factory hooks.

    ``default_preset`` names the task's recommended packaged preset (documentation
    and ``lucid plugins``; never applied implicitly). ``synthetic_preset`` is the
    embedded default recipe: applied under the user's overrides when ``lucid fit``
    gets neither ``--config`` nor a dataset root, so the run on the built-in
    synthetic set is short. See the module docstring for each hook's contract
    and tensor shapes.
    """

    name: str
    config_model: type[ModelConfig]
    capabilities: TaskCapabilities = field(default_factory=TaskCapabilities)
    aliases: tuple[str, ...] = ()
    description: str = ""
    default_preset: str | None = None
    synthetic_preset: str | None = None
    api_version: int = PLUGIN_API_VERSION
    build_model: Callable[..., Any] | None = None
    build_criterion: Callable[..., Any] | None = None
    decode: Callable[..., Any] | None = None
    make_synthetic: Callable[..., Any] | None = None
    build_metric: Callable[..., Any] | None = None
    draw: Callable[..., Any] | None = None

    FIT_HOOKS = ("build_model", "build_criterion", "decode", "build_metric")
    """The hooks ``lucid fit`` needs."""

    @property
    def trainable(self) -> bool:
        """True when every hook ``lucid fit`` needs is provided."""
        return not self.missing_hooks(*self.FIT_HOOKS)

    def missing_hooks(self, *names: str) -> list[str]:
        """Names among ``names`` whose hook is ``None``."""
        return [n for n in names if getattr(self, n) is None]
