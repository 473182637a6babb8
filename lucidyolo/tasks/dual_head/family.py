"""One function builds every task of the dual-head family; a task states only what differs from detection.

What the family shares is written once here: the decode paths (``e2e``, ``nms``)
and the inference view that serves them, the hooks every member provides (taken
from the member's own hooks module by their standard names), the synthetic set
of its fields, the gate's recipe (40 images x 100 epochs of the member's overfit
preset) and the export spec. A member passes its stems and losses (through its
hooks module), its fields, loss terms, metrics, gate floor and export outputs;
``from_base`` names hooks it takes unchanged from detection's module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import (
    EvalOption,
    ExportSpec,
    GateSpec,
    MetricSpec,
    TaskCapabilities,
    lazy_hook,
)
from lucidyolo.tasks.api_roles import DataRole, EvaluationRole, InferenceRole, ModelRole, Task
from lucidyolo.tasks.dual_head.config import DECODE_PATHS, INFERENCE_VIEW

BASE_HOOKS = "lucidyolo.tasks.detect.hooks"
"""Detection's hooks module: the family's base."""

MEMBER_HOOKS: dict[str, tuple[str, ...]] = {
    "data": ("target_rows",),
    "model": ("build_model", "build_criterion"),
    "inference": ("decode", "predict", "draw", "label_lines", "coco_results"),
    "evaluation": ("build_metric", "metric_update", "matches", "evaluate"),
}
"""The hooks every member provides, by role (a member's module defines each, or takes it ``from_base``)."""

_OPTIONAL: dict[str, tuple[str, ...]] = {
    "data": ("label_stats",),
    "model": ("transfer_weights", "published_meta"),
    "inference": (),
    "evaluation": (),
}
"""Optional hooks a member may add, by role."""


class SyntheticSet:
    """``make_synthetic`` of a member: the shapes scene labelled with the member's fields, COCO JSON.

    Picklable and torch-free (the writer is imported on call)."""

    def __init__(self, fields: tuple[str, ...], fmt: str = "coco") -> None:
        self.fields, self.fmt = tuple(fields), fmt

    def __call__(self, out_dir: Any, num_images: int, img_size: int, seed: int, **_: Any) -> Any:
        from lucidyolo.data.synth import write_synthetic

        return write_synthetic(out_dir, self.fields, num_images, img_size=img_size, seed=seed, fmt=self.fmt)

    def __repr__(self) -> str:
        return f"SyntheticSet({self.fields!r}, fmt={self.fmt!r})"


def dual_head_task(
    *,
    name: str,
    hooks: str,
    config: type[ModelConfig],
    fields: tuple[str, ...],
    loss_terms: tuple[str, ...],
    metrics: MetricSpec,
    gate_metric: str,
    gate_floor: float,
    export_outputs: tuple[str, ...],
    published_model: str,
    preset_prefix: str,
    aliases: tuple[str, ...] = (),
    description: str = "",
    multi_device: bool = True,
    compile_step: bool = False,
    meta_keys: tuple[str, ...] = (),
    reference_meta: Mapping[str, Any] | None = None,
    eval_options: tuple[EvalOption, ...] = (),
    eval_batch_size: int = 32,
    extra_hooks: tuple[str, ...] = (),
    from_base: tuple[str, ...] = (),
) -> Task:
    """A task of the family.

    Args:
        name: the task's name.
        hooks: its hooks module (``package.module``): every hook of :data:`MEMBER_HOOKS`, ``gate_score``,
            ``deploy`` and ``export_check``, unless named in ``from_base``.
        config: its ``model`` section (a :class:`~lucidyolo.tasks.dual_head.config.DualHeadModelConfig`).
        fields, loss_terms, metrics, meta_keys, reference_meta, eval_options, eval_batch_size: as the roles' fields.
        gate_metric, gate_floor: what ``lucid gate overfit`` measures and the floor it must reach.
        export_outputs: the deployed graph's named outputs.
        published_model: the publisher's model class name of its checkpoints (``DetectionModel``).
        preset_prefix: its presets are ``<prefix>_nano_{smoke,synthetic,overfit}.yaml``.
        extra_hooks: optional hooks its module also provides (``label_stats``, ``transfer_weights``,
            ``published_meta``).
        from_base: hooks taken unchanged from detection's module.
    """

    unknown = [h for h in extra_hooks if not any(h in names for names in _OPTIONAL.values())]
    if unknown:
        raise ValueError(f"{name}: extra_hooks {unknown} are not optional hooks of the family ({_OPTIONAL})")

    def hook(hook_name: str) -> Any:
        module = BASE_HOOKS if hook_name in from_base else hooks
        return lazy_hook(f"{module}:{hook_name}")

    def role_hooks(role: str) -> dict[str, Any]:
        names = (*MEMBER_HOOKS[role], *(h for h in extra_hooks if h in _OPTIONAL[role]))
        return {h: hook(h) for h in names}

    return Task(
        name=name,
        aliases=aliases,
        description=description,
        capabilities=TaskCapabilities(multi_device=multi_device, export=True, compile_step=compile_step),
        default_preset=f"{preset_prefix}_nano_smoke.yaml",
        presets_package=hooks.rpartition(".")[0],  # its presets/ folder beside its hooks
        synthetic_preset=f"{preset_prefix}_nano_synthetic.yaml",
        data=DataRole(fields=fields, meta_keys=meta_keys, reference_meta=dict(reference_meta or {}),
                      make_synthetic=SyntheticSet(fields), **role_hooks("data")),
        model=ModelRole(config=config, loss_terms=loss_terms, published_models=(published_model,),
                        export=ExportSpec(outputs=export_outputs, deploy=hook("deploy"), check=hook("export_check")),
                        **role_hooks("model")),
        inference=InferenceRole(decode_paths=DECODE_PATHS, inference_view=INFERENCE_VIEW, **role_hooks("inference")),
        evaluation=EvaluationRole(
            metrics=metrics, eval_options=eval_options, eval_batch_size=eval_batch_size,
            # every member's gate: its overfit preset, 40 images x 100 epochs (the floors' measurements: DECISIONS)
            gate=GateSpec(preset=f"{preset_prefix}_nano_overfit.yaml", metric=gate_metric, floor=gate_floor,
                          score=hook("gate_score"), images=40, epochs=100),
            **role_hooks("evaluation"),
        ),
    )
