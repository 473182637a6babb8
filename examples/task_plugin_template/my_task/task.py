"""The ``my_task`` task: its name, options, declarations and hooks.

``lucid --help`` and ``lucid plugins`` import this module to list tasks, so it
must stay cheap: no torch here. Hooks are named as ``"module:function"``
strings (:func:`~lucidyolo.tasks.api.lazy_hook`) and imported on first call.

The hook contracts (arguments, tensor shapes, return values) are documented in
``lucidyolo/tasks/api.py``; ``plugins/lucidyolo-cls`` in the lucid-yolo
repository is a complete plugin (image classification) to read alongside.
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import LazyHook, MetricSpec, TaskCapabilities, TaskSpec, lazy_hook


class MyTaskConfig(ModelConfig):
    """The ``model`` config section of this task: the shared options plus the task's own.

    Keep pydantic's ``extra="forbid"`` (inherited): a misspelt key must be an
    error, not a silently ignored option.
    """

    # An example option, settable as `lucid fit my_task --model.my_loss_gain 2` or in a
    # config file; build_criterion receives it as cfg.my_loss_gain. Rename or delete it.
    my_loss_gain: float = Field(1.0, ge=0, description="weight of the task's loss")


IMPLEMENTED: frozenset[str] = frozenset()
"""Names of the hooks in ``hooks.py`` that are written (no longer stubs).

A hook not listed here is declared as ``None``: "this task does not provide it".
Then ``lucid plugins`` reports ``trainable: false`` and ``lucid fit my_task``
refuses with exit code 2 naming the missing hooks, instead of starting a run
that crashes in a stub. Add each name as you write its hook, e.g.
``frozenset({"build_model", "build_criterion"})``.
"""


def _hook(name: str) -> LazyHook | None:
    return lazy_hook(f"my_task.hooks:{name}") if name in IMPLEMENTED else None


SPEC = TaskSpec(
    # The task name users type (`lucid fit my_task`); lower-case letters, digits and _,
    # equal to the entry-point name in pyproject.toml.
    name="my_task",
    aliases=(),
    description="one line shown by `lucid plugins`",
    config_model=MyTaskConfig,
    # multi_device=True only once the epoch metric is correct across DDP ranks (its states
    # are gathered); export=True once `export` below is an ExportSpec.
    capabilities=TaskCapabilities(multi_device=False, export=False, compile_step=False),
    # Per-instance label fields read beyond boxes, labels and difficult: "polygons",
    # "rboxes", "keypoints" + "visibility", or none (boxes and class labels only).
    fields=(),
    # Dataset facts the model needs (e.g. "num_keypoints"); saved in checkpoints.
    meta_keys=(),
    # Keys of the criterion's `terms` dict; each is logged as train/<term>_loss.
    loss_terms=("main",),
    # What build_metric's compute() returns, with a val/ prefix; `primary` selects best.ckpt.
    metrics=MetricSpec(keys=("val/score",), primary="val/score"),
    # `lucid eval` defaults when --img-size / --batch-size are not given.
    eval_batch_size=32,
    # Optional: a reader for a dataset layout of your own (else COCO / YOLO / DOTA roots).
    read_split=_hook("read_split"),
    # Training: `lucid fit` needs these five.
    build_model=_hook("build_model"),
    build_criterion=_hook("build_criterion"),
    decode=_hook("decode"),
    # The paths `decode` accepts; the first is the default (validation, `lucid predict`),
    # `lucid eval` scores each. One is enough for a model with one answer.
    decode_paths=("main",),
    build_metric=_hook("build_metric"),
    metric_update=_hook("metric_update"),
    # Optional: the built-in synthetic set (runs without --data-root, your own tests).
    make_synthetic=_hook("make_synthetic"),
    # Optional: `lucid eval`, `lucid predict` (draw: `--save`).
    evaluate=_hook("evaluate"),
    # Switches of your evaluate protocol, `lucid eval --option NAME=VALUE` (read from `options`),
    # e.g. (EvalOption("strict", False, "count near misses as errors"),); import EvalOption from
    # lucidyolo.tasks.api.
    eval_options=(),
    predict=_hook("predict"),
    draw=_hook("draw"),
    # Optional: the ground truth as `draw`'s dicts, for the run folder's batch pictures.
    target_rows=_hook("target_rows"),
    # Optional: `--model.weights` for tensors the generic name/shape/class-row rule cannot map.
    transfer_weights=_hook("transfer_weights"),
    # Optional: your own panels of `lucid fit`'s labels.png (e.g. a per-field histogram).
    label_stats=_hook("label_stats"),
    matches=_hook("matches"),
    # Optional: `lucid predict --save-txt` (YOLO-style lines) and `--save-json` (COCO results).
    label_lines=_hook("label_lines"),
    coco_results=_hook("coco_results"),
    # Optional: the model `lucid eval` / `lucid predict` run for some decode paths (default: the
    # whole model with BatchNorm folded).
    inference_view=_hook("inference_view"),
    # Optional: `lucid gate overfit` (a GateSpec) and `lucid export` (an ExportSpec).
    gate=None,
    export=None,
)
