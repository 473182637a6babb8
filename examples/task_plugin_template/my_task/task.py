"""The ``my_task`` task: its name, options and four roles (plugin API 3.0).

``lucid --help`` and ``lucid plugins`` import this module to list tasks, so it
must stay cheap: no torch here. Hooks are named as ``"module:function"``
strings (:func:`~lucidyolo.tasks.api.lazy_hook`) and imported on first call.

Read it in two tiers: first the five hooks ``lucid fit`` needs, then the rest,
grouped by role (data, model, inference, evaluation), every one optional. The
roles and their defaults are in ``lucidyolo/tasks/api_roles.py``; each hook's
contract (arguments, tensor shapes, return value) in ``lucidyolo/tasks/api.py``.
Two complete plugins to read alongside, in the lucid-yolo repository: the
smallest trainable one, ``tests/point_plugin/lucid_points`` (points without
boxes: its own field, YOLO row and survival rule, five hooks), and
``plugins/lucidyolo-cls`` (image classification: its own reader, export, eval).
"""

from __future__ import annotations

import dataclasses

from pydantic import Field

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import LazyHook, MetricSpec, TaskCapabilities, lazy_hook
from lucidyolo.tasks.api_roles import DataRole, EvaluationRole, InferenceRole, ModelRole, Task


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


# ---------------------------------------------------------------- tier 1: to train (`lucid fit`)
# Five hooks in three roles; with them (and a dataset root) `lucid fit my_task` runs.
MODEL = ModelRole(
    config=MyTaskConfig,
    # Keys of the criterion's `terms` dict; each is logged as train/<term>_loss.
    loss_terms=("main",),
    build_model=_hook("build_model"),
    build_criterion=_hook("build_criterion"),
)
INFERENCE = InferenceRole(
    # The paths `decode` accepts; the first is the default (validation, `lucid predict`),
    # `lucid eval` scores each. One is enough for a model with one answer.
    decode_paths=("main",),
    decode=_hook("decode"),
)
EVALUATION = EvaluationRole(
    # What build_metric's compute() returns, with a val/ prefix; `primary` selects best.ckpt.
    metrics=MetricSpec(keys=("val/score",), primary="val/score"),
    build_metric=_hook("build_metric"),
    metric_update=_hook("metric_update"),
)

# ---------------------------------------------------------------- tier 2: the rest, by role
TASK = Task(
    # The task name users type (`lucid fit my_task`); lower-case letters, digits and _,
    # equal to the entry-point name in pyproject.toml.
    name="my_task",
    aliases=(),
    description="one line shown by `lucid plugins`",
    # multi_device=True only once the epoch metric is correct across DDP ranks (its states
    # are gathered); export=True once the model role's `export` is an ExportSpec.
    capabilities=TaskCapabilities(multi_device=False, export=False, compile_step=False),
    data=DataRole(
        # Label fields read beyond boxes, labels and difficult: a registered FieldSpec each (its
        # YOLO / COCO rules, geometry and survival; see lucid_points/field.py), or none.
        fields=(),
        # False for instances without boxes (points): then a field's survive rule decides alone.
        boxes=True,
        # Dataset facts the model needs (e.g. "num_keypoints"); saved in checkpoints.
        meta_keys=(),
        # A reader for a dataset layout of your own (else COCO / YOLO / DOTA roots).
        read_split=_hook("read_split"),
        # The task's synthetic set (runs without --data-root, the gate, your own tests).
        make_synthetic=_hook("make_synthetic"),
        # Your own panels of `lucid fit`'s labels.png (e.g. a per-field histogram).
        label_stats=_hook("label_stats"),
        # The ground truth as `draw`'s dicts, for the run folder's batch pictures.
        target_rows=_hook("target_rows"),
    ),
    model=dataclasses.replace(
        MODEL,
        # `--model.weights` for tensors the generic name / shape / class-row rule cannot map.
        transfer_weights=_hook("transfer_weights"),
        # The dataset meta a published checkpoint implies (with published_models=(...)).
        published_meta=_hook("published_meta"),
        # `lucid export`: an ExportSpec (its outputs, deploy and parity check).
        export=None,
    ),
    inference=dataclasses.replace(
        INFERENCE,
        # `lucid predict` (draw: `--save`).
        predict=_hook("predict"),
        draw=_hook("draw"),
        # `--save-txt` lines (None: your field's YOLO row rule writes them) and `--save-json`.
        label_lines=_hook("label_lines"),
        coco_results=_hook("coco_results"),
        # The model `lucid eval` / `lucid predict` run (None: the whole model, BatchNorm folded).
        inference_view=_hook("inference_view"),
    ),
    evaluation=dataclasses.replace(
        EVALUATION,
        # `lucid eval`'s protocol, its `--option NAME=VALUE` switches (EvalOption) and default batch.
        evaluate=_hook("evaluate"),
        eval_options=(),
        eval_batch_size=32,
        # What the epoch metric matched: curves and confusion matrices of the run folder.
        matches=_hook("matches"),
        # `lucid gate overfit`: a GateSpec (recipe, metric, floor).
        gate=None,
    ),
)
