"""``lucid eval``: the task's protocol (COCO through pycocotools for the built-in tasks) for each of its decode paths."""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import NotAvailableError, UserError

if TYPE_CHECKING:
    from lucidyolo.tasks.api import TaskSpec


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("lucidyolo", "torch", "torchvision", "pytorch-lightning", "pycocotools", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def pick_device(device: str, api: bool = False) -> Any:
    """The torch device ``device`` names (``auto``: CUDA when present); ``api``: messages name ``device=``."""
    import torch

    said = f"device={device!r}" if api else f"--device {device!r}"
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UserError(f"{said} is not a device name.", fix="Use cpu, cuda, cuda:N or auto.") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"{said} asks for CUDA, which this machine does not have.",
                        fix=f"Use {'device=' + repr('cpu') if api else '--device cpu'}.")
    return dev


def inference_view(spec: TaskSpec, model: Any, paths: Sequence[str], device: Any, fold: bool = True) -> Any:
    """The model ``lucid eval`` / ``lucid predict`` run for the decode ``paths``: the task's ``inference_view``.

    A task without that hook gets an eval-mode, gradient-free copy of the whole
    model on ``device``, BatchNorm folded unless ``fold`` is False, fed its
    images in channels-last layout (faster with oneDNN and cuDNN; not on MPS).
    The original ``model`` is left as it was.
    """
    import torch

    device = torch.device(device)
    if spec.inference_view is not None:
        return spec.inference_view(model=model, paths=tuple(paths), device=device, fold=fold)
    import copy

    from lucidyolo.models.fuse import fold_batchnorm
    from lucidyolo.models.inference_view import ChannelsLastInput

    view = copy.deepcopy(model).eval()
    if fold:
        view = fold_batchnorm(view)
    view = view.to(device).eval().requires_grad_(False)
    return view if device.type == "mps" else ChannelsLastInput(view).eval()


def resolve_eval_options(spec: TaskSpec, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every one of the task's evaluation options: ``given`` values (strings or Python values) over the defaults.

    Raises:
        UserError: a name the task does not declare, or a value not of the option's type; the
            message lists the task's options.
    """
    given = dict(given or {})
    values: dict[str, Any] = {o.name: o.default for o in spec.eval_options}
    listing = "; ".join(o.describe() for o in spec.eval_options)
    known = f"Task {spec.name!r} has these evaluation options: {listing}." if listing else (
        f"Task {spec.name!r} has no evaluation options."
    )
    for name, value in given.items():
        option = spec.eval_option(name)
        if option is None:
            raise UserError(
                f"Evaluation option {name!r} is not declared by task {spec.name!r}.",
                why="each task declares the options its evaluation protocol reads; an unread one would be ignored silently.",
                fix=f"{known} Drop --option {name}=... or name one of those.",
            )
        try:
            values[name] = option.parse(value)
        except ValueError as exc:
            raise UserError(
                f"Evaluation option {name}={value} is not valid: {exc}.",
                why=f"{name} is a {option.kind} option.",
                fix=f"Give e.g. --option {option.name}={str(option.default).lower() if isinstance(option.default, bool) else option.default}. {known}",
            ) from exc
    return values


def run_eval(
    checkpoint: Path, data_root: Path | None = None, split: str = "val", ema: bool = True,
    img_size: int | None = None, batch_size: int | None = None, device: str = "auto", limit: int | None = None,
    output: Path | None = None, save_json: Path | None = None, task: str | None = None, fold: bool = True,
    coco_backend: str = "auto", plots: Path | None = None, options: Mapping[str, Any] | None = None,
    fallback_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Score a checkpoint; returns the report dict (also written to ``output``).

    Every decode path of the task (``TaskSpec.decode_paths``) is scored, the first
    one the report's ``default_path``. ``options`` are the task's evaluation
    options by name (``{"masks": False}``; strings are parsed to the option's
    type), checked against the checkpoint's task: an unknown name or a bad value
    is a :class:`UserError` listing the task's options. ``fallback_options`` (what
    deprecated flags such as ``--no-masks`` ask for) apply only where the task
    declares the name and ``options`` does not set it; elsewhere they are ignored,
    as those flags always were.

    ``fold=False`` keeps BatchNorm unfolded: the forward is then the one the
    training run validated with, to the last bit (folding changes float rounding,
    which can swap near-tied detections). ``img_size`` defaults to the run's
    ``data.img_size`` (the size it was trained and validated at); the report
    says which was used (``img_size``, ``img_size_source``). ``coco_backend``
    picks the library that scores COCO results (:mod:`lucidyolo.metrics.coco_backend`).

    Where the task's ``evaluate`` hook returns what it matched (``matches``),
    each scored IoU type gets ``curves`` (the best mean-F1 confidence and the
    class-mean precision, recall and F1 there) and each ``per_class`` entry its
    ``precision`` and ``recall`` at that confidence; ``plots`` names a folder
    for the PR / F1 / P / R curves and confusion matrices, named as in a run folder
    (``box_pr_curve.png`` ..., :func:`~lucidyolo.engine.run.curve_plots.plot_prefix`) for the
    default path and ``{path}_box_pr_curve.png`` ... for each other one; the report lists them in ``plots``.
    """
    from lucidyolo.engine.process.known_warnings import quiet_known_warnings

    quiet_known_warnings()
    t_start = time.perf_counter()
    from lucidyolo.engine.loop.build import data_root_of, open_split
    from lucidyolo.engine.weights.restore import restore
    from lucidyolo.engine.weights.weights_source import checkpoint_file
    from lucidyolo.metrics.coco_backend import resolve_backend, using_backend
    from lucidyolo.metrics.coco_eval import save_results_json

    resolve_backend(coco_backend)  # a bad name or a missing library fails before the model loads
    if plots is not None and plots.exists() and not plots.is_dir():
        raise UserError(
            f"--plots {plots} is a file, not a folder.",
            why="the curves are several PNG files and a JSON.",
            fix="Name a folder (it is created if missing).",
        )

    checkpoint = checkpoint_file(checkpoint)  # a run folder: the report names (and hashes) the file it scored
    restored = restore(checkpoint, ema=ema, task=task)
    spec, cfg = restored.spec, restored.config
    if spec.evaluate is None or spec.decode is None:
        raise NotAvailableError(
            f"`lucid eval` for task {spec.name!r} is not available: its plugin provides no evaluate hook.",
            fix="Nothing was run.",
        )
    if data_root is not None:
        cfg.data.data_root = data_root
    root = data_root_of(spec, cfg)
    which = "train" if split == cfg.data.train_split else "val"
    source = open_split(spec, cfg, root, split, which)
    if list(source.class_names) != _class_names_of(restored):
        raise UserError(
            f"The {split} split of {root} has classes {source.class_names[:5]}..., which differ from the "
            "checkpoint's training classes.",
            why="scores against another label space are meaningless.",
            fix="Evaluate on a dataset with the same categories.",
        )
    # the run's training size by default: a model scored at another size loses accuracy silently
    size_source = "--img-size" if img_size else "the run's data.img_size"
    img_size = img_size or cfg.data.img_size
    if img_size % 32:
        raise UserError(f"--img-size {img_size} is not a multiple of 32.", fix="Use e.g. 640.")
    given = {k: v for k, v in (fallback_options or {}).items() if spec.eval_option(k) is not None}
    task_options = resolve_eval_options(spec, {**given, **(options or {})})
    dev = pick_device(device)
    paths = tuple(spec.decode_paths)
    view = inference_view(spec, restored.model, paths, dev, fold=fold)
    from lucidyolo.models.fuse import unfolded_batchnorms

    left_unfolded = unfolded_batchnorms(view) if fold else 0  # the report claims only what was folded
    with using_backend(coco_backend):
        outcome = spec.evaluate(
            model=view,
            decode=functools.partial(spec.decode, cfg=cfg.model), cfg=cfg.model, source=source,
            img_size=img_size, batch_size=batch_size or spec.eval_batch_size, device=dev, limit=limit,
            options={**task_options, "matches": True}, paths=paths,
        )
    scored, timing, results = outcome["paths"], dict(outcome.get("timings", {})), outcome.get("results") or {}
    t_curves = time.perf_counter()
    written = add_curves(scored, outcome.get("matches") or {}, plots, spec.metrics.plot_names)
    timing["curves_s"] = time.perf_counter() - t_curves
    if save_json is not None:
        for i, (path, rows) in enumerate(results.items()):  # the first path keeps the given name
            save_results_json(rows, save_json if i == 0 else save_json.with_name(f"{save_json.stem}_{path}{save_json.suffix}"))
    timing["total_s"] = time.perf_counter() - t_start
    report = {
        "task": spec.name,
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": sha256_of(checkpoint),
        "weights": "ema" if restored.used_ema else "raw",
        "bn_folded": bool(fold) and not left_unfolded,
        **({"bn_left_unfolded": left_unfolded} if left_unfolded else {}),
        "data_root": str(root),
        "split": split,
        "num_images": int(outcome.get("num_images", len(source) if limit is None else min(limit, len(source)))),
        "img_size": img_size,
        "img_size_source": size_source,
        "engine": outcome.get("engine") or _scoring_engine(outcome["paths"], spec.name),
        "versions": library_versions(),
        "config": cfg.model_dump(mode="json"),
        "options": task_options,
        "default_path": paths[0],
        "paths": scored,
        "timings": timing,
        **({"plots": [str(p) for p in written]} if plots is not None else {}),
        # a protocol's own summary figures (e.g. how many whole scenes its tiles make)
        **{k: v for k, v in outcome.items()
           if k not in ("paths", "timings", "results", "num_images", "engine", "matches")},
    }
    if output is not None:
        with atomic_open(output, "w", encoding="utf-8") as f:
            f.write(json.dumps(report, indent=2))
    return report


def add_curves(paths: dict[str, Any], matches: dict[str, Any], plots: Path | None,
               plot_names: Mapping[str, str] | None = None) -> list[Path]:
    """Add ``curves`` and per-class ``precision`` / ``recall`` to ``paths`` from ``matches``; draw into ``plots``
    (file names by the task's ``plot_names``, as the run folder's).

    ``matches`` is ``{path: {iou_type: Matches}}``; per-class entries are paired with
    the matches' classes by name. Returns the files written (none without ``plots``).
    """
    from lucidyolo.metrics.curves import compute_curves

    written: list[Path] = []
    for i, (path, per_type) in enumerate(matches.items()):
        for iou_type, found in per_type.items():
            stats = paths.get(path, {}).get(iou_type)
            if not isinstance(stats, dict):
                continue
            curves = compute_curves(found)
            summary = curves.summary()
            stats["curves"] = {k: summary[k] for k in ("iou_threshold", "best_conf", "precision", "recall", "f1")}
            by_name = {c["name"]: c for c in summary["per_class"]}
            for entry in stats.get("per_class", []):
                own = by_name.get(str(entry.get("name")))
                if own is not None:
                    entry["precision"], entry["recall"] = own["precision"], own["recall"]
            if plots is not None:
                from lucidyolo.engine.run.curve_plots import plot_prefix, write_curve_plots

                kind = plot_prefix(iou_type, plot_names)  # a run folder's names: box_pr_curve.png ...
                prefix = kind if i == 0 else f"{plot_prefix(path)}_{kind}"  # the first path keeps the plain name
                written += write_curve_plots(curves, plots, prefix)
    return written


def _scoring_engine(paths: dict[str, Any], task: str) -> str:
    """The COCO backends named by the scored results, or the task's own protocol when none is."""
    found = {
        stats.get("backend")
        for per_type in paths.values() if isinstance(per_type, dict)
        for stats in per_type.values() if isinstance(stats, dict)
    } - {None}
    return ", ".join(sorted(found)) if found else f"the {task} task's own protocol"


def _class_names_of(restored: Any) -> list[str]:
    names = restored.checkpoint.get("lucid", {}).get("class_names")
    return list(names) if names else []
