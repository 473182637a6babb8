"""Contract checks for plugin authors.

Run :func:`check_task_spec` in your plugin's own test suite::

    from lucidyolo.testing import check_task_spec
    from my_plugin.task import SPEC

    def test_spec_honours_the_contract():
        check_task_spec(SPEC)
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lucidyolo.config.schema import DataConfig, ModelConfig, TrainerConfig
from lucidyolo.tasks.api import (
    ENGINE_EVAL_OPTIONS,
    TASK_NAME_RE,
    EvalOption,
    ExportSpec,
    GateSpec,
    MetricSpec,
    TaskCapabilities,
    TaskSpec,
    api_version_problem,
)


def as_record(spec: Any) -> Any:
    """The engine's record of a plugin's ``Task`` (API 3) or flat ``TaskSpec`` (API 2, through the adapter),
    as the registry makes it; anything else as it is."""
    from lucidyolo.tasks.api_roles import Task, from_flat

    if isinstance(spec, Task):
        return spec.record()
    if isinstance(spec, TaskSpec) and spec.roles is None:
        return from_flat(spec).record()
    return spec


def task_spec_problems(spec: Any) -> list[str]:
    """Every way ``spec`` (a ``Task``, or a 2.x ``TaskSpec``) breaks the plugin contract (empty when it is fine)."""
    spec = as_record(spec)
    if not isinstance(spec, TaskSpec):
        return [f"expected a lucidyolo.tasks.api_roles.Task (or a 2.x TaskSpec), got {type(spec).__name__}"]
    problems = []
    version = api_version_problem(spec.api_version)
    if version is not None and version[0] == "error":
        problems.append(version[1])
    for label in (spec.name, *spec.aliases):
        if not TASK_NAME_RE.match(label):
            problems.append(f"name or alias {label!r} must match {TASK_NAME_RE.pattern}")
    if spec.name in spec.aliases or len(set(spec.aliases)) != len(spec.aliases):
        problems.append("aliases must be unique and differ from the name")
    if not (isinstance(spec.config_model, type) and issubclass(spec.config_model, ModelConfig)):
        problems.append("config_model must subclass lucidyolo.config.schema.ModelConfig")
    else:
        if spec.config_model.model_config.get("extra") != "forbid":
            problems.append("config_model must keep extra='forbid' (unknown keys are errors)")
        try:
            spec.config_model.model_validate({"task": spec.name, "surely_not_a_key": 1})
            problems.append("config_model accepted an unknown key")
        except ValidationError:
            pass
    for key, base in (("config_data", DataConfig), ("config_trainer", TrainerConfig)):
        section = getattr(spec, key)
        if not (isinstance(section, type) and issubclass(section, base)):
            problems.append(f"{key} must subclass lucidyolo.config.schema.{base.__name__}")
        elif section.model_config.get("extra") != "forbid":
            problems.append(f"{key} must keep extra='forbid' (unknown keys are errors)")
        else:
            try:
                section()
            except ValidationError as exc:
                problems.append(f"{key}'s defaults do not validate: {exc.errors()[0]['msg']}")
    if spec.layouts and spec.read_split is None:
        problems.append("layouts name the task's own reader's layouts: they need a read_split hook")
    if not isinstance(spec.capabilities, TaskCapabilities):
        problems.append("capabilities must be a TaskCapabilities")
    problems += _metric_problems(spec)
    for hook in TaskSpec.HOOKS:
        value = getattr(spec, hook)
        if value is not None and not callable(value):
            problems.append(f"hook {hook} must be callable or None")
    if spec.gate is not None and not (isinstance(spec.gate, GateSpec) and callable(spec.gate.score)):
        problems.append("gate must be a GateSpec with a callable score")
    if spec.export is not None and not (
        isinstance(spec.export, ExportSpec) and spec.export.outputs and callable(spec.export.deploy)
    ):
        problems.append("export must be an ExportSpec naming at least one output, with a callable deploy")
    if not all(isinstance(f, str) for f in spec.fields):
        problems.append("fields must be strings")
    problems += _decode_and_option_problems(spec)
    if not spec.boxes and not _survival_decided_by_fields(spec.fields):
        problems.append(
            "boxes=False, but no field of the task decides survival after a crop alone (a registered FieldSpec "
            "with a survive rule and survive_alone=True): the engine's box rule would drop every box-less instance"
        )
    return problems


def _survival_decided_by_fields(fields: tuple[str, ...]) -> bool:
    from lucidyolo.structures.fields import registered_fields

    return any(f.name in fields and f.survive is not None and f.survive_alone for f in registered_fields())


def _decode_and_option_problems(spec: TaskSpec) -> list[str]:
    problems = []
    paths = spec.decode_paths
    if not (isinstance(paths, tuple) and paths and all(isinstance(p, str) and p for p in paths)):
        problems.append("decode_paths must be a non-empty tuple of names (the first is the default)")
    elif len(set(paths)) != len(paths):
        problems.append(f"decode_paths must be unique, got {paths}")
    if not (isinstance(spec.eval_options, tuple) and all(isinstance(o, EvalOption) for o in spec.eval_options)):
        return [*problems, "eval_options must be a tuple of EvalOption"]
    names = [o.name for o in spec.eval_options]
    if len(set(names)) != len(names):
        problems.append(f"eval_options names must be unique, got {names}")
    for option in spec.eval_options:
        if not TASK_NAME_RE.match(option.name):
            problems.append(f"eval option name {option.name!r} must match {TASK_NAME_RE.pattern}")
        if option.name in ENGINE_EVAL_OPTIONS:
            problems.append(f"eval option {option.name!r} is the engine's own (reserved: {', '.join(ENGINE_EVAL_OPTIONS)})")
        if not isinstance(option.default, bool | int | float | str):
            problems.append(f"eval option {option.name!r}: the default must be a bool, int, float or str")
    return problems


def _metric_problems(spec: TaskSpec) -> list[str]:
    m = spec.metrics
    if not isinstance(m, MetricSpec):
        return ["metrics must be a MetricSpec"]
    problems = []
    if not all(isinstance(k, str) and k.startswith("val/") for k in m.keys):
        problems.append("metrics.keys must be strings starting with 'val/'")
    if m.primary is not None and m.primary not in m.keys:
        problems.append(f"metrics.primary {m.primary!r} is not one of metrics.keys")
    unknown = set(m.columns) - set(m.keys)
    if unknown:
        problems.append(f"metrics.columns names keys that are not logged: {sorted(unknown)}")
    if spec.build_metric is not None and not m.keys:
        problems.append("a task with build_metric must declare metrics.keys")
    return problems


def check_task_spec(spec: Any, run_hooks: bool = True) -> dict[str, Any]:
    """Raise ``AssertionError`` listing every contract violation of ``spec``.

    With ``run_hooks`` (the default) every provided hook is then called on tiny
    inputs (:func:`exercise_hooks`; imports torch, takes seconds). Returns what
    was exercised.
    """
    problems = task_spec_problems(spec)
    if problems:
        raise AssertionError("TaskSpec contract violations:\n- " + "\n- ".join(problems))
    return exercise_hooks(as_record(spec)) if run_hooks else {}


def _check_evaluate(outcome: Any, decode_paths: tuple[str, ...]) -> None:
    assert isinstance(outcome, dict) and isinstance(outcome.get("paths"), dict) and outcome["paths"], \
        "evaluate must return {'paths': {path: {kind: {'stats': {...}}}}, ...}"
    unknown = sorted(set(outcome["paths"]) - set(decode_paths))
    assert not unknown, f"evaluate scored paths {unknown} that are not among decode_paths {decode_paths}"
    for path, kinds in outcome["paths"].items():
        assert all(isinstance(k.get("stats"), dict) for k in kinds.values()), f"evaluate path {path}: stats dicts"


def exercise_hooks(spec: TaskSpec, img_size: int = 64, num_images: int = 4, workdir: Any = None) -> dict[str, Any]:
    """Call every provided hook on tiny inputs, checking what each returns (imports torch).

    The synthetic set (``make_synthetic``) is written, read back through the
    task's readers and packed exactly as training packs it; the model is built
    and run on that batch, then the criterion, both decode paths, the metric and
    its adapter, ``predict``, ``draw`` and the export ``deploy`` graph.

    Returns:
        What was exercised (hook name -> a short description), for the caller's report.

    Raises:
        AssertionError: a hook broke its contract (the message names it).
    """
    import functools
    import tempfile
    from pathlib import Path

    import numpy as np
    import torch

    from lucidyolo.errors import UserError

    spec = as_record(spec)
    if spec.make_synthetic is None or spec.build_model is None:
        return {}
    if workdir is None:  # a throw-away folder, removed however the check ends
        with tempfile.TemporaryDirectory(prefix=f"lucid-check-{spec.name}-") as folder:
            return exercise_hooks(spec, img_size, num_images, folder)
    from lucidyolo.data.datasets import ValDataset
    from lucidyolo.data.layouts import open_source
    from lucidyolo.structures.packed import collate_packed, unpack

    done: dict[str, Any] = {}
    cfg = spec.config_model.model_validate({"task": spec.name})
    work = Path(workdir)
    root = Path(spec.make_synthetic(work / "data", num_images, img_size, 0))
    if spec.read_split is not None:
        source = spec.read_split(root=root, split="train", fields=spec.fields, layout=None, explicit_paths={})
    else:
        source = open_source(root, "train", spec.fields)
    assert 0 < len(source) <= num_images, f"make_synthetic wrote {len(source)} train images, asked for {num_images}"
    done["make_synthetic"] = f"{len(source)} images, {source.num_instances} instances"
    if spec.read_split is not None:
        done["read_split"] = source.layout
    done["augment"] = _check_training_augment(source, spec.fields, img_size)
    dataset = ValDataset(source, img_size)
    images, gt, meta = unpack(collate_packed([dataset[i] for i in range(len(source))], spec.fields), "cpu")
    num_classes = len(source.class_names)
    data_meta = {key: source.meta().get(key) for key in spec.meta_keys}  # what the engine passes
    model = spec.build_model(cfg=cfg, num_classes=num_classes, meta=data_meta)
    assert isinstance(model, torch.nn.Module), "build_model must return a torch.nn.Module"
    model.train()
    outputs = model(images)
    done["build_model"] = type(model).__name__
    done["transfer_weights"] = _check_transfer(spec, cfg, model, list(source.class_names), data_meta)
    if spec.build_criterion is not None:
        # as the engine calls it (engine/loop/build.py): the run's model too (the keypoint criterion reads its flow)
        criterion = spec.build_criterion(cfg=cfg, num_classes=num_classes, meta=data_meta, model=model)
        total, terms = criterion(outputs, gt, 0.5)
        assert total.ndim == 0 and torch.isfinite(total), f"criterion total must be a finite scalar, got {total}"
        top = {k for k in terms if "/" not in k}  # "branch/term" keys are diagnostics
        assert top == set(spec.loss_terms), f"criterion terms {sorted(top)} != loss_terms {sorted(spec.loss_terms)}"
        total.backward()
        done["build_criterion"] = sorted(top)
    model.eval()
    with torch.no_grad():
        outputs = model(images)
    decoded = None
    if spec.decode is not None:
        decoded = {path: spec.decode(outputs=outputs, path=path, cfg=cfg) for path in spec.decode_paths}
        for path, value in decoded.items():
            # A tensor, or a structure the engine can move (.cpu()) and index by image whose rows are a tensor.
            rows = value if isinstance(value, torch.Tensor) else getattr(value, "rows", None)
            assert isinstance(rows, torch.Tensor) and rows.shape[0] == len(source), f"decode {path}: batch axis"
            assert hasattr(value, "cpu") and value.cpu()[0] is not None, f"decode {path}: .cpu() and [i]"
        first = decoded[spec.default_decode_path]
        done["decode"] = tuple((first if isinstance(first, torch.Tensor) else first.rows).shape)
    if spec.build_metric is not None and spec.metric_update is not None and decoded is not None:
        metric = spec.build_metric(cfg=cfg, num_classes=num_classes, meta=data_meta)
        spec.metric_update(metric=metric, outputs=outputs, decoded=decoded[spec.default_decode_path], gt=gt,
                           batch_meta=meta)
        result = metric.compute()
        want = {k.removeprefix("val/") for k in spec.metrics.keys}
        assert want <= set(result), f"metric computes {sorted(result)}, metrics.keys need {sorted(want)}"
        done["build_metric"] = {k: float(result[k]) for k in want}
    if spec.predict is not None and decoded is not None:
        hw = tuple(int(v) for v in meta["orig_hw"][0])
        rows = spec.predict(
            decoded=decoded[spec.default_decode_path][0], image_hw=hw, letterbox=tuple(float(v) for v in meta["letterbox"][0]),
            class_names=source.class_names, conf=0.0, meta=data_meta, cfg=cfg,
        )
        assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows), "predict must return a list of dicts"
        done["predict"] = len(rows)
        if spec.draw is not None:
            canvas = np.zeros((hw[0], hw[1], 3), np.uint8)
            drawn = spec.draw(image=canvas, predictions=rows, class_names=source.class_names, meta=data_meta)
            assert hasattr(drawn, "save") and drawn.size == (hw[1], hw[0]), "draw must return a PIL image of the input size"
            done["draw"] = drawn.size
    if spec.evaluate is not None and spec.decode is not None:
        try:
            options = {**{o.name: o.default for o in spec.eval_options}, "matches": False}
            # as lucid eval calls it: decode already carries the run's config
            decode = functools.partial(spec.decode, cfg=cfg)
            outcome = spec.evaluate(model=model, decode=decode, source=source, img_size=img_size, batch_size=2,
                                    device=torch.device("cpu"), limit=2, options=options, paths=spec.decode_paths,
                                    cfg=cfg)
        except UserError as exc:  # a protocol may refuse a split it cannot score (with what, why, fix)
            outcome = {"refused": str(exc)}
        if "refused" in outcome:
            done["evaluate"] = f"refused: {outcome['refused']}"
        else:
            _check_evaluate(outcome, spec.decode_paths)
            done["evaluate"] = sorted(outcome["paths"])
    if spec.gate is not None:
        value = float(spec.gate.score(model=model, source=source, img_size=img_size, conf=spec.gate.conf, cfg=cfg))
        done["gate.score"] = value  # NaN is a legal answer (no ground truth); a wrong type raises here
    if spec.export is not None:
        deployed = spec.export.deploy(model=model, cfg=cfg).eval()
        with torch.no_grad():
            out = deployed(images)
        got = 1 if isinstance(out, torch.Tensor) else len(out)
        assert got == len(spec.export.outputs), f"deployed graph returns {got} outputs, export names {spec.export.outputs}"
        done["export.deploy"] = spec.export.outputs
        if spec.export.check is not None and _has("onnxruntime") and _has("onnx"):
            from lucidyolo.export.onnx import export_onnx

            path = export_onnx(deployed, work / f"{spec.name}.onnx", img_size=img_size, output_names=spec.export.outputs)
            result = spec.export.check(deployed=deployed, onnx_path=path, images=images[:1], cfg=cfg)
            assert isinstance(result.get("passed"), bool), "export.check must return a dict with a bool 'passed'"
            assert result["passed"], f"export.check: onnxruntime disagrees with PyTorch: {result.get('summary', result)}"
            done["export.check"] = result.get("summary", "passed")
    return done


def _check_training_augment(source: Any, fields: tuple[str, ...], img_size: int, seeds: int = 4) -> str:
    """Every field of a training sample goes through mosaic, affine and the horizontal flip consistently.

    * A field with geometry (an ``affine`` rule) has a ``flip`` rule too, or a flip would mirror the
      pixels and leave the field where it was.
    * Each sample is drawn twice from the same random stream, with ``flip_lr`` 0 and 1 (the flip's draw is
      taken either way, so the two differ only by the mirror): the flipped image is the unflipped one
      mirrored, and its targets are the unflipped targets mirrored by the boxes' and each field's own flip
      rule, compared as the field packs them for a batch (a rule that depends on more than the values, the
      width and the meta fails here).
    * Mirroring twice gives the unflipped targets back (a rule like ``x' = W - x + 1`` drifts).
    * Each field's flip agrees with its own affine rule under the mirror matrix ``x' = right - x``, up to
      the order of an instance's parts (keypoints swap left and right by ``flip_idx``): a wrong flip that
      is consistent with itself (the identity, a vertical flip, ``W - x + 1``) fails here.
    * Augmentation keeps some of the instances: a survival rule that drops every one (a task without
      boxes whose field does not decide survival alone) fails here, not as a run that learns nothing.

    Raises:
        AssertionError: naming the field and the broken property.
    """
    import numpy as np

    from lucidyolo.data.augment.flip import FLIP_OFFSET, hflip_targets
    from lucidyolo.data.augment.pipeline import TrainAugment, strengths_for_variant
    from lucidyolo.structures.fields import field_specs

    meta = source.meta()
    for spec in field_specs(fields):
        assert spec.affine is None or spec.flip is not None or not spec.can_flip(meta), (
            f"augment: field {spec.name!r} has an affine rule but no flip rule: a flip would mirror the pixels "
            "and leave the field unmirrored (give it a flip rule, or a can_flip that refuses)"
        )

    def same(x: Any, y: Any, what: str) -> None:
        for name in ("boxes", "labels", "difficult"):
            assert np.allclose(getattr(x, name), getattr(y, name), atol=1e-3), f"augment: {name} {what}"
        for spec in y.present_fields():
            counts = np.array([len(y)])
            a, b = spec.pack([x.values_of(spec)], counts), spec.pack([y.values_of(spec)], counts)
            for key in a:
                assert np.allclose(a[key], b[key], atol=1e-3), f"augment: field {spec.name!r} ({key}) {what}"

    augs = [
        TrainAugment(len(source), source.load_image, source.targets, img_size,
                     strengths_for_variant("n", flip_lr=p, mixup=0.0), meta)
        for p in (0.0, 1.0)
    ]
    samples = [tuple(aug(seed % len(source), np.random.default_rng(seed)) for aug in augs) for seed in range(seeds)]
    kept = sum(len(plain.targets) for plain, _ in samples)
    assert kept or not source.num_instances, (
        f"augment: {seeds} training samples drawn from {source.num_instances} instances kept 0 of them: the survival "
        "rule after the crop drops every instance (a task without boxes needs a field whose survive rule decides "
        "alone, FieldSpec.survive_alone=True)"
    )
    right = img_size - FLIP_OFFSET
    mirror = np.array([[-1.0, 0.0, right], [0.0, 1.0, 0.0]])
    unchecked: set[str] = set()
    for plain, flipped in samples:
        if not all(f.can_flip(meta) for f in plain.targets.present_fields()):
            return "not flipped: the dataset meta cannot mirror a field (e.g. keypoints without flip_idx)"
        assert np.array_equal(flipped.image, plain.image[:, :, ::-1]), "augment: the flipped image is not the mirror"
        want = hflip_targets(plain.targets, img_size, meta)
        same(flipped.targets, want, "of the flipped sample are not the unflipped sample mirrored by the flip rules")
        same(hflip_targets(want, img_size, meta), plain.targets, "mirrored twice is not the unflipped sample")
        for spec in plain.targets.present_fields():
            if spec.affine is not None and spec.flip is not None and not _flip_is_the_mirror(
                    spec, plain.targets.values_of(spec), len(plain.targets), mirror, meta):
                unchecked.add(spec.name)
    note = f"; no mirror in the affine rule of {', '.join(sorted(unchecked))}" if unchecked else ""
    return f"{seeds} mosaic samples flipped and mirrored, {kept} instances{note}"


def _flip_is_the_mirror(spec: Any, values: dict[str, Any], n: int, mirror: Any, meta: Any) -> bool:
    """Assert ``spec``'s flip equals its affine rule under ``mirror``; False when the affine rule refuses mirrors."""
    import numpy as np

    try:
        by_affine = spec.affine(values, mirror)
    except ValueError:  # an affine rule may refuse maps it cannot follow; then nothing to compare with
        return False
    counts = np.array([n])
    flipped = spec.pack([spec.flip(values, float(mirror[0, 2]), meta)], counts)
    mirrored = spec.pack([by_affine], counts)
    for key, got in flipped.items():
        want = mirrored[key]
        assert got.shape == want.shape, f"augment: field {spec.name!r} ({key}) flips to shape {got.shape}, mirrors to {want.shape}"
        if np.allclose(got, want, atol=1e-3):
            continue
        # a flip may reorder an instance's parts (left and right keypoints): compare each instance's parts as a set
        first = got.reshape(len(got), -1)[:1].tolist(), want.reshape(len(want), -1)[:1].tolist()
        assert got.ndim >= 2 and np.allclose(_parts_sorted(got), _parts_sorted(want), atol=1e-3), (
            f"augment: field {spec.name!r} ({key}): its flip rule is not its affine rule under the mirror "
            f"x' = right - x (first row: flip {first[0]}, affine {first[1]})"
        )
    return True


def _parts_sorted(a: Any) -> Any:
    """``(N, K, ...)`` with each instance's ``K`` parts in lexicographic order (rounded to 1e-3)."""
    import numpy as np

    parts = np.round(a.reshape(a.shape[0], a.shape[1], -1).astype(np.float64), 3)
    out = np.empty_like(parts)
    for i, rows in enumerate(parts):  # instances of a few test samples, not a training step
        out[i] = rows[np.lexsort(rows.T[::-1])] if rows.size else rows
    return out


def _check_transfer(spec: TaskSpec, cfg: Any, model: Any, names: list[str], meta: dict[str, Any]) -> str:
    """``--model.weights`` onto this task's model: classes reversed plus one new, through the task's hook.

    Every tensor the module tree declares per class (``class_params``) must take the
    reversed rows; the rest must load by name and shape, or be skipped with a reason.
    """
    from pathlib import Path

    import torch

    from lucidyolo.engine.weights.transfer import SourceWeights, per_class_tensors, transfer_weights

    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    weights = SourceWeights(Path("<exercise>"), spec.name, cfg.variant, names, dict(meta), state, used_ema=False)
    fresh = spec.build_model(cfg=cfg, num_classes=len(names) + 1, meta=meta)
    report = transfer_weights(fresh, weights, [*reversed(names), "__new_class__"], meta, hook=spec.transfer_weights)
    assert report.matched == list(reversed(names)) and report.new == ["__new_class__"], report.classes_line()
    loaded = fresh.state_dict()
    for name in per_class_tensors(fresh):
        assert name in report.class_rows or name in report.skipped, f"transfer: per-class {name} neither mapped nor skipped"
        if name in report.class_rows:
            want = state[name].flip(0)
            assert torch.equal(loaded[name][: len(names)], want), f"transfer: class rows of {name} not reversed"
    assert all(isinstance(r, str) and r for r in report.skipped.values()), "transfer: every skip needs a reason"
    return report.line()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
