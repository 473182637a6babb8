"""The task plugin API 3.0: a task is four typed roles (data, model, inference, evaluation).

A plugin exposes one :class:`Task` through the ``lucidyolo.tasks`` entry-point
group. Each role is a frozen dataclass whose fields are the role's options and
hooks, every one with a default; a plugin fills in only what differs, and a
family of tasks shares one set of roles and replaces a few hooks
(``dataclasses.replace(DETECT_INFERENCE, decode=..., predict=...)``: the
built-in dual-head family in :mod:`lucidyolo.tasks.dual_head`).

================  ==============================================================================
role              holds
================  ==============================================================================
``data``          fields, boxes, layouts and reader, dataset meta, synthetic set, label statistics,
                  ground truth as drawable rows, the ``data`` config section
``model``         the ``model`` config section, model, criterion and its loss terms, weight
                  transfer, the published checkpoints it reads, export
``inference``     decode paths and decode, inference view, predict rows, drawing, label lines,
                  COCO results
``evaluation``    epoch metric and its update, matches, ``lucid eval``'s protocol and options, gate
================  ==============================================================================

A hook is any callable with the signature its :class:`typing.Protocol` below
states (keyword arguments; accept ``**_`` so that a later 3.x minor can pass
one more), or a :func:`~lucidyolo.tasks.api.lazy_hook` string imported on first
call (keeps the spec module torch-free). ``None`` means "not provided": the
commands that need it refuse with exit code 2, naming what is missing. The
contracts of the hooks (tensor shapes, return values) are in
:mod:`lucidyolo.tasks.api`'s docstring, one section per hook.

Versioning (semantic, of the plugin API, independent of lucidyolo's own
version): a 3.x minor only adds (a role field with a default, a keyword
argument to a hook); a plugin built for 3.y loads in every 3.x with x >= y, and
in an older 3.x with a warning. A major removes or changes; lucidyolo 1.x
loads API 3.x plugins, and 2.x plugins (the flat :class:`TaskSpec`) through an
adapter for the whole 3.x line. Another major is refused, naming both versions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lucidyolo.config.schema import DataConfig, ModelConfig, TrainerConfig
from lucidyolo.tasks.api import (
    PLUGIN_API_VERSION,
    EvalOption,
    ExportSpec,
    GateSpec,
    MetricSpec,
    TaskCapabilities,
    TaskSpec,
)

if TYPE_CHECKING:  # torch-free at run time: the spec modules import this one
    from pathlib import Path


# ------------------------------------------------------------------ the hooks' signatures
class ReadSplit(Protocol):
    def __call__(self, *, root: Path, split: str, fields: tuple[str, ...], layout: str | None,
                 explicit_paths: Mapping[str, Any]) -> Any: ...


class MakeSynthetic(Protocol):
    def __call__(self, out_dir: Path, num_images: int, img_size: int, seed: int) -> Any: ...


class LabelStats(Protocol):
    def __call__(self, *, instances: Mapping[str, Any], image_index: Any, image_hw: Any,
                 class_names: Sequence[str], meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]: ...


class TargetRows(Protocol):
    def __call__(self, *, gt: Mapping[str, Any], image_hw: tuple[int, int], class_names: Sequence[str],
                 meta: Mapping[str, Any]) -> list[list[dict[str, Any]]]: ...


class BuildModel(Protocol):
    def __call__(self, *, cfg: Any, num_classes: int, meta: Mapping[str, Any]) -> Any: ...


class BuildCriterion(Protocol):
    def __call__(self, *, cfg: Any, num_classes: int, meta: Mapping[str, Any], model: Any) -> Any: ...


class TransferWeights(Protocol):
    def __call__(self, *, source: Mapping[str, Any], target: Mapping[str, Any], class_map: Sequence[int],
                 source_meta: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]: ...


class PublishedMeta(Protocol):
    def __call__(self, *, checkpoint: Any) -> dict[str, Any]: ...


class Decode(Protocol):
    def __call__(self, *, outputs: Any, path: str, cfg: Any) -> Any: ...


class InferenceView(Protocol):
    def __call__(self, *, model: Any, paths: tuple[str, ...], device: Any, fold: bool) -> Any: ...


class Predict(Protocol):
    def __call__(self, *, decoded: Any, image_hw: tuple[int, int], letterbox: tuple[float, float, float],
                 class_names: Sequence[str], conf: float, meta: Mapping[str, Any], cfg: Any) -> list[dict[str, Any]]: ...


class Draw(Protocol):
    def __call__(self, *, image: Any, predictions: Sequence[Mapping[str, Any]], class_names: Sequence[str],
                 meta: Mapping[str, Any]) -> Any: ...


class LabelLines(Protocol):
    def __call__(self, *, predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int],
                 class_names: Sequence[str], meta: Mapping[str, Any]) -> list[str]: ...


class CocoResults(Protocol):
    def __call__(self, *, predictions: Sequence[Mapping[str, Any]], image_id: int, image_hw: tuple[int, int],
                 class_names: Sequence[str], meta: Mapping[str, Any]) -> list[dict[str, Any]]: ...


class BuildMetric(Protocol):
    def __call__(self, *, cfg: Any, num_classes: int, meta: Mapping[str, Any]) -> Any: ...


class MetricUpdate(Protocol):
    def __call__(self, *, metric: Any, outputs: Any, decoded: Any, gt: Mapping[str, Any],
                 batch_meta: Mapping[str, Any]) -> None: ...


class Matches(Protocol):
    def __call__(self, *, metric: Any) -> Mapping[str, Any] | None: ...


class Evaluate(Protocol):
    def __call__(self, *, model: Any, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
                 limit: int | None, options: Mapping[str, Any], paths: tuple[str, ...], cfg: Any) -> dict[str, Any]: ...


# ------------------------------------------------------------------ the roles
@dataclass(frozen=True)
class DataRole:
    """What a task reads and how its labels look.

    Attributes:
        fields: the per-instance (or per-image) fields beyond boxes, labels and difficult, each a
            registered :class:`~lucidyolo.structures.fields.FieldSpec` (its rules and codecs).
        boxes: False for a task whose instances have no boxes (points): its fields decide survival.
        meta_keys: the dataset meta the task needs (saved in checkpoints).
        reference_meta: the meta that builds a model without a dataset (``lucid model summary``).
        layouts: the layout names the task's own :attr:`read_split` understands.
        config: the task's ``data`` config section (its own defaults or keys).
        read_split: reads one split of a layout the built-in readers do not know; ``None``: the
            built-in COCO / YOLO / DOTA readers, by the fields' rules.
        make_synthetic: writes the task's synthetic set (the gate, the embedded default run).
        label_stats: the task's own panels of ``labels.png``.
        target_rows: a batch's ground truth as :attr:`InferenceRole.draw`'s dicts (batch pictures).
    """

    fields: tuple[str, ...] = ()
    boxes: bool = True
    meta_keys: tuple[str, ...] = ()
    reference_meta: Mapping[str, Any] = field(default_factory=dict)
    layouts: tuple[str, ...] = ()
    config: type[DataConfig] = DataConfig
    read_split: ReadSplit | None = None
    make_synthetic: MakeSynthetic | None = None
    label_stats: LabelStats | None = None
    target_rows: TargetRows | None = None


@dataclass(frozen=True)
class ModelRole:
    """The network, its objective and its weights in and out.

    Attributes:
        config: the task's ``model`` config section (a :class:`ModelConfig` subclass, extra keys forbidden).
        loss_terms: the keys of the criterion's terms, logged as ``train/<term>_loss``.
        build_model: the ``torch.nn.Module`` of a run.
        build_criterion: its loss (``criterion(outputs, gt, alpha) -> (total, terms)``).
        transfer_weights: the tensors the task maps better than the generic rule (``--model.weights``).
        published_models: the publisher's model class names of the YOLO26 checkpoints the task reads.
        published_meta: the dataset meta such a checkpoint implies.
        export: the deployed graph's outputs, its ``deploy`` and the parity ``check``.
    """

    config: type[ModelConfig] = ModelConfig
    loss_terms: tuple[str, ...] = ()
    build_model: BuildModel | None = None
    build_criterion: BuildCriterion | None = None
    transfer_weights: TransferWeights | None = None
    published_models: tuple[str, ...] = ()
    published_meta: PublishedMeta | None = None
    export: ExportSpec | None = None


@dataclass(frozen=True)
class InferenceRole:
    """From a forward's outputs to predictions and the files they are written to.

    Attributes:
        decode_paths: the paths :attr:`decode` accepts; the first is the default (validation, batch
            pictures, ``lucid predict``), ``lucid eval`` scores them all.
        decode: a forward's outputs on one path to the task's prediction tensor.
        inference_view: the eval-mode model ``lucid eval`` / ``predict`` run; ``None``: a BN-folded copy.
        predict: one image's decoded rows to JSON-able dicts in original pixels.
        draw: those dicts drawn on an image.
        label_lines: ``--save-txt`` lines; ``None``: the field's own YOLO row rule (or the box row).
        coco_results: ``--save-json`` COCO results; ``None``: ``--save-json`` refuses.
    """

    decode_paths: tuple[str, ...] = ("e2e", "nms")
    decode: Decode | None = None
    inference_view: InferenceView | None = None
    predict: Predict | None = None
    draw: Draw | None = None
    label_lines: LabelLines | None = None
    coco_results: CocoResults | None = None


@dataclass(frozen=True)
class EvaluationRole:
    """How a task is scored: during training, by ``lucid eval`` and by its gate.

    Attributes:
        metrics: the epoch metrics' keys, primary key, ``results.csv`` columns and report families.
        build_metric: the epoch metric (a ``torchmetrics.Metric``).
        metric_update: feeds it one validation batch.
        matches: what the epoch metric matched (curves, confusion matrices).
        evaluate: ``lucid eval``'s protocol.
        eval_options: its ``--option NAME=VALUE`` switches.
        eval_batch_size: ``lucid eval``'s default batch.
        gate: ``lucid gate overfit``'s recipe, metric and floor.
    """

    metrics: MetricSpec = field(default_factory=MetricSpec)
    build_metric: BuildMetric | None = None
    metric_update: MetricUpdate | None = None
    matches: Matches | None = None
    evaluate: Evaluate | None = None
    eval_options: tuple[EvalOption, ...] = ()
    eval_batch_size: int = 32
    gate: GateSpec | None = None


@dataclass(frozen=True)
class Task:
    """A task plugin of API 3.0: its name, what it can do, its presets and its four roles.

    Attributes:
        name: the entry point's name (lower-case letters, digits, ``_``).
        data, model, inference, evaluation: the roles.
        aliases: other names ``lucid`` accepts for it.
        description: one line for ``lucid plugins``.
        capabilities: what it can do (more than one device, export, compiled step).
        default_preset: its recommended packaged preset (documentation and ``lucid plugins``).
        synthetic_preset: the recipe of ``lucid fit <task>`` without a dataset.
        presets_package: an importable package whose ``presets/`` folder holds its presets.
        config_trainer: its ``trainer`` config section (its own ``max_epochs``).
        api_version: the plugin API it was written for.
    """

    name: str
    data: DataRole = field(default_factory=DataRole)
    model: ModelRole = field(default_factory=ModelRole)
    inference: InferenceRole = field(default_factory=InferenceRole)
    evaluation: EvaluationRole = field(default_factory=EvaluationRole)
    aliases: tuple[str, ...] = ()
    description: str = ""
    capabilities: TaskCapabilities = field(default_factory=TaskCapabilities)
    default_preset: str | None = None
    synthetic_preset: str | None = None
    presets_package: str | None = None
    config_trainer: type[TrainerConfig] = TrainerConfig
    api_version: tuple[int, int] = PLUGIN_API_VERSION

    def record(self) -> TaskSpec:
        """The engine's record of this task: the roles' fields side by side (:class:`TaskSpec`)."""
        d, m, i, e = self.data, self.model, self.inference, self.evaluation
        return TaskSpec(
            name=self.name, aliases=self.aliases, description=self.description, capabilities=self.capabilities,
            default_preset=self.default_preset, synthetic_preset=self.synthetic_preset,
            presets_package=self.presets_package, config_trainer=self.config_trainer, api_version=self.api_version,
            fields=d.fields, boxes=d.boxes, meta_keys=d.meta_keys, reference_meta=d.reference_meta,
            layouts=d.layouts, config_data=d.config, read_split=d.read_split, make_synthetic=d.make_synthetic,
            label_stats=d.label_stats, target_rows=d.target_rows,
            config_model=m.config, loss_terms=m.loss_terms, build_model=m.build_model,
            build_criterion=m.build_criterion, transfer_weights=m.transfer_weights,
            published_models=m.published_models, published_meta=m.published_meta, export=m.export,
            decode_paths=i.decode_paths, decode=i.decode, inference_view=i.inference_view, predict=i.predict,
            draw=i.draw, label_lines=i.label_lines, coco_results=i.coco_results,
            metrics=e.metrics, build_metric=e.build_metric, metric_update=e.metric_update, matches=e.matches,
            evaluate=e.evaluate, eval_options=e.eval_options, eval_batch_size=e.eval_batch_size, gate=e.gate,
            roles=self,
        )


def from_flat(spec: TaskSpec) -> Task:
    """The roles of a plugin written for API 2.x (one flat :class:`TaskSpec`): the 2.x adapter.

    Every 2.x field has its place in one role; ``eval_img_size``, unread since 2.4, is dropped.
    """
    return Task(
        name=spec.name, aliases=spec.aliases, description=spec.description, capabilities=spec.capabilities,
        default_preset=spec.default_preset, synthetic_preset=spec.synthetic_preset,
        presets_package=spec.presets_package, config_trainer=spec.config_trainer,
        api_version=spec.api_version if isinstance(spec.api_version, tuple) else (int(spec.api_version), 0),
        data=DataRole(fields=spec.fields, boxes=spec.boxes, meta_keys=spec.meta_keys,
                      reference_meta=spec.reference_meta, layouts=spec.layouts, config=spec.config_data,
                      read_split=spec.read_split, make_synthetic=spec.make_synthetic, label_stats=spec.label_stats,
                      target_rows=spec.target_rows),
        model=ModelRole(config=spec.config_model, loss_terms=spec.loss_terms, build_model=spec.build_model,
                        build_criterion=spec.build_criterion, transfer_weights=spec.transfer_weights,
                        published_models=spec.published_models, published_meta=spec.published_meta,
                        export=spec.export),
        inference=InferenceRole(decode_paths=spec.decode_paths, decode=spec.decode,
                                inference_view=spec.inference_view, predict=spec.predict, draw=spec.draw,
                                label_lines=spec.label_lines, coco_results=spec.coco_results),
        evaluation=EvaluationRole(metrics=spec.metrics, build_metric=spec.build_metric,
                                  metric_update=spec.metric_update, matches=spec.matches, evaluate=spec.evaluate,
                                  eval_options=spec.eval_options, eval_batch_size=spec.eval_batch_size,
                                  gate=spec.gate),
    )
