"""The task plugin API: the hooks' contracts, and the flat record the engine reads.

Since API 3.0 a plugin writes its task as four typed roles
(:class:`~lucidyolo.tasks.api_roles.Task`, in :mod:`lucidyolo.tasks.api_roles`)
exposed through an entry point in the group ``lucidyolo.tasks``::

    [project.entry-points."lucidyolo.tasks"]
    mytask = "my_package.task:TASK"

The registry compiles a ``Task`` into one :class:`TaskSpec`, the flat record
the engine reads (``Task.record()``). A plugin written for API 2.x gives that
flat record itself; it loads through the 2.x adapter
(:func:`~lucidyolo.tasks.api_roles.from_flat`) for the whole 3.x line. The
hooks below are the same in both forms; the roles say where each one lives.

The entry-point name must equal ``TaskSpec.name``. Importing the module that
holds the spec must be cheap (no torch at import time): ``lucid --help`` and
``lucid plugins`` load specs. Give hooks as :func:`lazy_hook` strings
(``lazy_hook("my_package.hooks:build_model")``) so their modules, and torch, are
imported on first call only.

The engine names no task: everything it does differently per task comes from
the hooks below. Hooks are called with keyword arguments, so an implementation
may accept ``**_`` and later minor versions can add arguments without breaking
it. Every hook is optional; ``None`` means "this task does not provide it" and
the commands that need it refuse with exit code 2, naming what is missing.

Training (``lucid fit``)
------------------------

``build_model(cfg, num_classes, meta) -> torch.nn.Module``
    ``cfg`` is the task's validated :class:`~lucidyolo.config.schema.ModelConfig`
    subclass, ``meta`` the dataset meta dict (:attr:`TaskSpec.meta_keys`, e.g.
    ``num_keypoints``). The module maps images ``(B, 3, H, W)`` float in
    ``[0, 1]`` to an output dict. Detection-style tasks return
    ``{"o2m": {...}, "o2o": {...}, "anchors": (A, 2), "strides": (A,)}`` with
    ``boxes (B, A, 4)`` raw ltrb in stride units and ``logits (B, A, C)`` per
    branch (docs/ARCHITECTURE.md); other tasks return what their own criterion,
    decoder and metric adapter read.

``build_criterion(cfg, num_classes, meta) -> torch.nn.Module``
    The engine also passes ``model=`` (API 2.6), the model ``build_model``
    returned, for a criterion that reads one of its modules (the keypoint
    flow); accept it with ``**_``.
    ``criterion(outputs, gt, alpha) -> (total, terms)``: ``gt`` is the padded
    ground truth of :func:`lucidyolo.structures.packed.unpack` (``boxes (B, M,
    4)``, ``labels (B, M)``, ``mask (B, M)`` bool, ``difficult (B, M)``, plus the
    task's fields), ``alpha`` the criterion's own epoch weight: at the start of
    each epoch the engine calls ``criterion.epoch_weight(epoch, max_epochs)``
    where the criterion has one (the dual head's progressive o2m weight,
    ``model.alpha_start`` to ``model.alpha_end``), else it passes 1.0;
    ``total`` a scalar tensor, ``terms`` a dict of scalar tensors before gains,
    keyed by :attr:`TaskSpec.loss_terms`. The engine logs every such term
    (``train/<term>_loss``, ``val/<term>_loss``, progress bar); keys holding a
    ``/`` (``o2m/box``) are diagnostics for the caller and are not logged.

``decode(outputs, path, cfg) -> torch.Tensor``
    ``cfg`` is the run's validated model config (API 2.5; limits and radii
    come from it; the contract check calls without it). ``path`` is one of :attr:`TaskSpec.decode_paths` (the built-in tasks:
    ``"e2e"``, o2o top-k, or ``"nms"``, o2m + NMS); returns the task's
    prediction tensor, e.g. ``(B, 300, 6)`` ``[x1, y1, x2, y2, score, class]``
    in network-input pixels, zero-score rows as padding. Validation, the run
    folder's batch pictures and ``lucid predict`` use the first path (unless
    ``--decoder`` names another); ``lucid eval`` scores every path.

``published_meta(checkpoint) -> dict`` (optional, API 2.6)
    The dataset meta a published YOLO26 checkpoint of one of the task's
    :attr:`TaskSpec.published_models` implies (the keypoint count from its
    ``kpt_shape``); ``checkpoint`` is a
    :class:`~lucidyolo.engine.weights.published_checkpoint.PublishedCheckpoint`
    (tensors by the publisher's names, class names, image size).

``inference_view(model, paths, device, fold) -> torch.nn.Module`` (optional, API 2.4)
    The eval-mode, gradient-free copy of a trained ``model`` on ``device``
    that ``lucid eval`` and ``lucid predict`` run: its output is what
    ``decode`` reads for each of ``paths`` (a subset of
    :attr:`TaskSpec.decode_paths`). ``fold`` asks for BatchNorm folded into
    the convolutions (``False``: the forward of the training run's
    validation, to the last bit). It may drop what ``paths`` do not read (the
    built-in tasks' view for ``("e2e",)`` alone is the deployed o2o branch:
    :func:`lucidyolo.models.inference_view.inference_model`). The original
    model is left as it was. ``None``: a BN-folded copy of the whole model.

``build_metric(cfg, num_classes, meta) -> torchmetrics.Metric``
    The epoch metric; ``compute()`` returns a dict whose keys, prefixed with
    ``val/``, are :attr:`MetricSpec.keys`. ``cfg`` is the run's validated
    model config (API 2.5; a metric's radius or limits come from it).

``metric_update(metric, outputs, decoded, gt, batch_meta) -> None``
    Feeds one validation batch to the metric: ``outputs`` the raw model output,
    ``decoded`` the decode of the first of :attr:`TaskSpec.decode_paths`, ``gt`` the padded ground truth,
    ``batch_meta`` the :func:`~lucidyolo.structures.packed.unpack` meta
    (``index (B,)``, ``orig_hw (B, 2)``, ``letterbox (B, 3)``).

``matches(metric) -> Mapping[str, Matches]``
    After the epoch metric's ``compute()``: what it matched, as
    :class:`~lucidyolo.metrics.matches.Matches` (per scored detection its
    score, class, true-positive flag at IoU 0.5, ignored flag and the class of
    an other-class ground truth it overlaps; ground truths per class), keyed by
    the IoU type's letter of the ``results.csv`` columns (``"B"`` boxes,
    ``"M"`` masks, ``"R"`` rotated boxes, ``"P"`` keypoints). Read from the
    metric's own matching, never matched again: the engine draws the PR, F1,
    precision and recall curves and confusion matrices of the epoch
    ``best.ckpt`` holds from it (``box_pr_curve.png`` ...: the letter names the files
    through :func:`lucidyolo.engine.run.curve_plots.plot_prefix`, ``B`` box, ``M`` mask,
    ``R`` obb, ``P`` keypoints, another letter as it is). ``None`` (or ``{}``):
    no curves. ``lucid eval --plots`` reads the same from the ``evaluate``
    hook's optional ``matches`` key (``{path: {iou_type: Matches}}``).

``read_split(root, split, fields, layout, explicit_paths) -> ImageSource``
    Reads one split of a dataset root the built-in readers do not know (e.g.
    class folders). ``None``: the built-in COCO / YOLO / DOTA readers, which
    read ``fields`` by their label conventions. The returned
    :class:`~lucidyolo.data.source.ImageSource` may carry per-image targets
    (a registered per-image field) besides instances.

``make_synthetic(out_dir, num_images, img_size, seed) -> pathlib.Path``
    Writes the task's synthetic set (real image files + labels) and returns a
    dataset root the task's readers accept. Used by the gate and the embedded
    default run.

Commands
--------

``gate``: a :class:`GateSpec` whose ``score(model, source, img_size, conf)``
    returns the gate metric (a float, NaN fails) of a trained model on the
    training slice.

``evaluate(model, decode, source, img_size, batch_size, device, limit, options, paths, cfg) -> dict``
    ``lucid eval``'s protocol; returns ``{"paths": {path: {iou_type: stats
    dict}}, "timings": {...}, "results": {path: list of JSON-able dicts}}``,
    one entry per decode path of ``paths`` (:attr:`TaskSpec.decode_paths`, in
    order; API 2.4), ``model`` the task's :attr:`inference_view` for them.
    :mod:`lucidyolo.metrics.coco_protocol` is the reusable pycocotools protocol.
    Optional keys: ``num_images``, ``engine`` (what scored it; default
    ``pycocotools``), ``matches`` (``{path: {iou_type: Matches}}``, asked for
    with ``options["matches"]``: curves, per-class precision and recall) and any
    other JSON-able summary figure, copied into the report.
    ``cfg`` is the checkpoint's model config and ``decode`` already carries it (API 2.5).
    ``options`` holds every one of the task's :attr:`TaskSpec.eval_options`
    (its default, or the value ``lucid eval --option NAME=VALUE`` /
    ``Model.evaluate(options=...)`` gave, parsed to the default's type) and
    the command's own switch ``matches``.

``predict(decoded, image_hw, letterbox, class_names, conf, cfg) -> list[dict]``
    (``cfg``: the run's model config, API 2.5.) One image's ``decoded`` rows (``decode(...)[i]``) to JSON-able dicts in
    original pixels (``letterbox = (scale, pad_x, pad_y)``), filtered by ``conf``.

``draw(image, predictions, class_names) -> PIL.Image.Image``
    Draws :attr:`predict`'s dicts on an ``(H, W, 3)`` uint8 RGB image.

``target_rows(gt, image_hw, class_names, meta) -> list[list[dict]]`` (optional, API 2.3)
    A packed batch's ground truth as the dicts :attr:`draw` takes, so the run
    folder's ``train_batch*.jpg`` and ``val_batch*_labels.jpg`` draw targets
    with the task's own drawing: ``gt`` the padded ground truth of
    :func:`~lucidyolo.structures.packed.unpack` on the CPU, ``image_hw`` the
    network input ``(S, S)``; one list per image of the batch, in
    network-input pixels, ``"score"`` NaN (a label has no score: the built-in
    drawers caption it with the class name alone). ``None``: no batch images
    for the task (``lucid fit`` says so once).

``export``: an :class:`ExportSpec` (named ONNX outputs and an onnxruntime
    parity check of the deployed graph).

Predict files (``lucid predict --save-txt`` / ``--save-json``, optional)
-----------------------------------------------------------------------

``label_lines(predictions, image_hw, class_names, meta) -> list[str]``
    One image's :attr:`predict` dicts as the lines of a YOLO-format label file
    of the task's own row rule (the one its YOLO reader reads), coordinates
    normalised by ``image_hw = (h, w)``, each line ending in the row's
    confidence (drop the last column and the file is a training label file).
    ``None``: ``--save-txt`` refuses with exit code 2.

``coco_results(predictions, image_id, image_hw, class_names, meta) -> list[dict]``
    One image's :attr:`predict` dicts as COCO results dicts (``image_id``,
    ``category_id`` = the contiguous label index, ``bbox`` ``[x, y, w, h]``,
    ``score``, and the task's ``segmentation`` / ``keypoints``) that
    ``pycocotools.coco.COCO.loadRes`` accepts. ``None``: ``--save-json``
    refuses with exit code 2 (a task with no COCO results format, e.g. image
    classification).

Label statistics (``labels.png`` / ``labels.json`` of ``lucid fit``, API 2.2)
--------------------------------------------------------------------------

``label_stats(instances, image_index, image_hw, class_names, meta) -> dict[str, dict]``
    The task's own numbers about the training split's labels, beside the ones
    the engine computes for every task (instances per class; where there are
    boxes, box centre and size distributions and instances per image).
    ``instances`` maps each attribute of the split's ``M`` counted instances
    (ignore regions left out) to its value over all images joined, read without
    decoding an image: ``boxes (M, 4)`` xyxy px, ``labels (M,)``,
    ``difficult (M,)`` and the task's fields (``rboxes (M, 5)``, ``keypoints
    (M, K, 2)`` + ``visibility (M, K)``, ``polygons`` a
    :class:`~lucidyolo.structures.polygons.Polygons` with owners ``0..M-1``);
    ``image_index (M,)`` int64 is each instance's image and ``image_hw (N, 2)``
    every image's ``(h, w)``. Returns panels by name (``{}`` for none), each
    plain data that one generic function draws and ``labels.json`` stores::

        {"kind": "histogram", "title": str, "edges": (B + 1,), "counts": (B,)}
        {"kind": "bars", "title": str, "categories": (n,) str, "series": {legend: (n,)}}
        {"kind": "histogram2d", "title": str, "x_edges": (X + 1,), "y_edges": (Y + 1,), "counts": (X, Y)}

    arrays as numpy arrays or lists; optional keys ``xlabel``, ``ylabel``,
    ``y_down`` (a histogram2d in image coordinates) and ``summary`` (``{name:
    number}``, stored in the JSON, not drawn). The split
    may hold millions of instances: vectorise (numpy histograms over the joined
    arrays), never loop over instances. ``None``: the engine's panels only.

Starting from weights (``--model.weights``, API 2.1)
----------------------------------------------------

``transfer_weights(source, target, class_map, source_meta, meta) -> dict``
    Maps the tensors the task knows better than the engine's generic rule
    (copy where name and shape match; rows of per-class tensors, those a module
    lists in its ``class_params`` attribute, moved by ``class_map``). ``source``
    is the checkpoint's state dict, ``target`` the fresh model's (name ->
    tensor), ``class_map[j]`` the checkpoint's index of the model's class ``j``
    or ``-1`` for a new class, ``source_meta`` / ``meta`` the dataset meta of
    the checkpoint and of this run (e.g. ``num_keypoints``). Returns ``{name:
    tensor}`` for a tensor to load (the target's shape) or ``{name: reason}``
    (a short string) for one to leave at its fresh initialisation; names it
    does not return go through the generic rule.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lucidyolo.config.schema import (
    DataConfig,
    ModelConfig,
    RunConfig,
    TrainerConfig,
    run_config_class,
)

PLUGIN_API_VERSION: tuple[int, int] = (3, 0)
"""``(major, minor)``: another major is refused (2.x loads through the adapter); a newer minor loads with a warning."""

ADAPTED_MAJORS: tuple[int, ...] = (2,)
"""Older majors still loaded, through the adapter (:func:`~lucidyolo.tasks.api_roles.from_flat`), for the 3.x line."""

TASK_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class LazyHook:
    """A hook given as ``"package.module:attribute"``, imported on first call.

    Keeps spec modules torch-free and pickles by name (DataLoader workers
    resolve it again in their own process).
    """

    __slots__ = ("target", "_fn")

    def __init__(self, target: str) -> None:
        module, sep, attr = target.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"lazy hook {target!r} must look like 'package.module:attribute'")
        self.target = target
        self._fn: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        """Import the target (once) and return it."""
        if self._fn is None:
            module, _, attr = self.target.partition(":")
            obj: Any = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            self._fn = obj
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LazyHook, (self.target,))

    def __repr__(self) -> str:
        return f"lazy_hook({self.target!r})"


def lazy_hook(target: str) -> LazyHook:
    """A hook imported on first call: ``lazy_hook("my_plugin.hooks:build_model")``."""
    return LazyHook(target)


def lazy_hooks(module: str, *names: str) -> dict[str, LazyHook]:
    """Hooks of the same names in one module: ``TaskSpec(..., **lazy_hooks("my_plugin.hooks", "decode", "draw"))``."""
    return {name: LazyHook(f"{module}:{name}") for name in names}


@dataclass(frozen=True)
class TaskCapabilities:
    """What a task can do; cross-field config rules are driven by these, never by task names.

    Attributes:
        multi_device: False when the epoch metric cannot be gathered across ranks;
            such a task refuses ``trainer.devices`` other than 1 and multi-process
            strategies.
        export: the deployed graph exports to ONNX.
        compile_step: ``model.compile_step`` (torch.compile of forward + loss) is
            supported on CUDA for this task.
    """

    multi_device: bool = True
    export: bool = True
    compile_step: bool = False


@dataclass(frozen=True)
class MetricSpec:
    """The epoch metrics a task logs, monitors and writes to ``results.csv``.

    Attributes:
        keys: logged keys in order (``"val/mAP50-95"``, ...); ``build_metric``'s
            ``compute()`` returns them without the ``val/`` prefix.
        primary: the key ``best.ckpt`` monitors (higher is better).
        columns: ``results.csv`` column of each key (default: the key itself).
        summary: keys printed in the run's final line (default: ``keys``).
        families: the metric families ``Model.evaluate``'s report offers as attributes,
            ``{attribute: result kind}`` where the kind is a key of the ``evaluate`` hook's
            ``paths[path]`` (``{"box": "bbox"}``: ``report.box.map`` is the ``bbox`` AP);
            optional: without it a report reads kinds by ``EvalReport.family(kind)``.
        plot_names: the file-name prefix of the curve plots of each IoU type, keyed both by the
            ``matches`` hook's letter (the run folder) and by the ``evaluate`` hook's kind
            (``lucid eval --plots``), so both write the same names (``{"B": "box", "bbox": "box"}``:
            ``box_pr_curve.png``); a type not named keeps its key, made file-safe.
    """

    keys: tuple[str, ...] = ()
    primary: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    summary: tuple[str, ...] = ()
    families: Mapping[str, str] = field(default_factory=dict)
    plot_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def monitor(self) -> str | None:
        return self.primary or (self.keys[0] if self.keys else None)

    def column(self, key: str) -> str:
        return self.columns.get(key, key)


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
# kind -> (Python types taken as they are, converter, reason); bool is never a number here
_NUMERIC_PARSE: dict[str, tuple[tuple[type, ...], Callable[[Any], int | float], str]] = {
    "int": ((int,), int, "is not a whole number"),
    "float": ((int, float), float, "is not a number"),
}

ENGINE_EVAL_OPTIONS = ("matches",)
"""Keys of the ``evaluate`` hook's ``options`` that the engine sets itself: no task may declare them."""


@dataclass(frozen=True)
class EvalOption:
    """One option of a task's ``lucid eval`` protocol (``--option NAME=VALUE``, ``Model.evaluate(options=)``).

    Attributes:
        name: the option's name, a lower-case identifier (``masks``); ``matches``
            is the engine's own and may not be declared.
        default: the value when none is given; its type (bool, int, float or str)
            is the option's type.
        help: one line for ``lucid eval --help`` and error messages.
    """

    name: str
    default: bool | int | float | str
    help: str = ""

    @property
    def kind(self) -> str:
        """``bool``, ``int``, ``float`` or ``str``: the default's type."""
        return type(self.default).__name__

    def parse(self, value: Any) -> bool | int | float | str:
        """``value`` (a command-line string, or a Python value) as the option's type.

        Raises:
            ValueError: ``value`` is not of the option's type (a short reason).
        """
        kind = self.kind
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if isinstance(value, str) and text in _TRUE + _FALSE:
                return text in _TRUE
            raise ValueError(f"{value!r} is not true or false")
        numeric = _NUMERIC_PARSE.get(kind)
        if numeric is not None:
            accepted, convert, reason = numeric
            if isinstance(value, accepted) and not isinstance(value, bool):
                return convert(value)
            if isinstance(value, str):
                try:
                    return convert(value.strip())
                except ValueError:
                    pass
            raise ValueError(f"{value!r} {reason}")
        if isinstance(value, str):
            return value
        raise ValueError(f"{value!r} is not a string")

    def describe(self) -> str:
        """``masks=true|false (default true): also score ...``: one line for listings."""
        shape = {"bool": "true|false", "int": "N", "float": "X"}.get(self.kind, "TEXT")
        default = str(self.default).lower() if isinstance(self.default, bool) else str(self.default)
        return f"{self.name}={shape} (default {default})" + (f": {self.help}" if self.help else "")


@dataclass(frozen=True)
class GateSpec:
    """Recipe, metric and floor of a task's ``lucid gate overfit``.

    ``score(model, source, img_size, conf) -> float`` measures the trained
    model on the training slice (an :class:`~lucidyolo.data.source.ImageSource`).
    """

    preset: str
    metric: str
    floor: float
    score: Callable[..., float]
    images: int = 100
    img_size: int = 320
    epochs: int = 50
    conf: float = 0.25


@dataclass(frozen=True)
class ExportSpec:
    """What ``lucid export`` writes and how ``--check`` compares it.

    Attributes:
        outputs: ONNX output names of the deployed graph, in order.
        deploy: ``deploy(model) -> nn.Module``, the deployed graph of a trained
            model (e.g. BN folded, inference branch only, decode included) whose
            forward returns ``outputs`` in order.
        check: ``check(deployed, onnx_path, images) -> dict`` with at least
            ``passed`` (bool) and ``summary`` (one line); compares onnxruntime
            with PyTorch on ``images (B, 3, S, S)``.
    """

    outputs: tuple[str, ...]
    deploy: Callable[..., Any]
    check: Callable[..., dict[str, Any]] | None = None


@dataclass(frozen=True)
class TaskSpec:
    """A task plugin: its name, config model, capabilities and hooks.

    ``default_preset`` names the task's recommended packaged preset (documentation
    and ``lucid plugins``; never applied implicitly). ``synthetic_preset`` is the
    embedded default recipe: applied under the user's overrides when ``lucid fit``
    gets neither ``--config`` nor a dataset root. ``fields`` are the per-instance
    fields the task reads beyond ``boxes``, ``labels`` and ``difficult``
    (``polygons``, ``rboxes``, ``keypoints`` + ``visibility``, or a plugin's own);
    ``meta_keys`` the dataset meta it needs (saved in checkpoints);
    ``reference_meta`` the meta that builds a model without a dataset (``lucid
    model summary``: the size the paper reports, e.g. 17 keypoints).
    ``config_data`` and ``config_trainer`` (API 2.5) are the task's subclasses of
    the ``data`` and ``trainer`` sections, to give it its own defaults (a small
    ``img_size``, another ``max_epochs``); they may add keys too.
    ``layouts`` (API 2.5) are the layout names the task's own ``read_split``
    understands; ``data.layout`` accepts them beside the built-in readers'.
    ``eval_batch_size`` is ``lucid eval``'s default batch; ``eval_img_size`` is
    no longer read (``lucid eval`` scores at the run's own ``data.img_size``,
    the size it was trained and validated at) and stays only so that plugins
    written for API 2.0 that set it still load; it goes in API 3.0. ``presets_package``
    names an importable package whose ``presets/`` folder holds the task's own
    YAML presets (found by bare name like the packaged ones). ``label_stats``
    (optional, API 2.2) returns the task's own panels of ``labels.png`` (keypoint
    visibility, angles, polygon vertices) as plain histogram / bar data.
    ``matches`` (optional, API 2.3) returns what the epoch metric matched, for
    the curves and confusion matrices. ``label_lines`` and ``coco_results``
    (optional) write ``lucid predict --save-txt`` rows and ``--save-json``
    COCO results from the ``predict`` dicts (API 2.3).
    ``target_rows`` (optional, API 2.3) turns a batch's ground truth into
    ``draw``'s dicts for the run folder's batch images.
    ``decode_paths`` (API 2.4) names the paths ``decode`` accepts, the first
    the default (validation, batch pictures, ``lucid predict``); ``lucid
    eval`` scores them all and ``lucid predict --decoder`` accepts only them.
    ``inference_view`` (optional, API 2.4) builds the model ``lucid eval`` and
    ``lucid predict`` run for some of the paths. ``eval_options`` (API 2.4)
    are the task's ``lucid eval --option NAME=VALUE`` switches, passed to
    ``evaluate`` in ``options``. ``published_models`` (optional, API 2.6) are the
    publisher's top-level model class names of the published YOLO26 checkpoints
    the task reads (``DetectionModel``): ``--model.weights yolo26n.pt`` and
    ``--checkpoint yolo26n.pt`` pick the task by them; ``published_meta(checkpoint)``
    (optional) returns the dataset meta such a file implies (the keypoint count).
    ``boxes`` (API 2.5) is False for a task whose
    instances have no boxes (points): its readers get them from a field rule
    that returns none, the engine carries zero boxes it never shows (no box
    panels in ``labels.png``), and survival after a crop is the fields' own
    (``FieldSpec.survive_alone``). See the module docstring for each hook's
    contract and tensor shapes.
    """

    name: str
    config_model: type[ModelConfig]
    config_data: type[DataConfig] = DataConfig
    config_trainer: type[TrainerConfig] = TrainerConfig
    layouts: tuple[str, ...] = ()
    capabilities: TaskCapabilities = field(default_factory=TaskCapabilities)
    aliases: tuple[str, ...] = ()
    description: str = ""
    default_preset: str | None = None
    synthetic_preset: str | None = None
    api_version: Any = PLUGIN_API_VERSION
    fields: tuple[str, ...] = ()
    meta_keys: tuple[str, ...] = ()
    reference_meta: Mapping[str, Any] = field(default_factory=dict)
    loss_terms: tuple[str, ...] = ()
    metrics: MetricSpec = field(default_factory=MetricSpec)
    eval_img_size: int = 640
    eval_batch_size: int = 32
    presets_package: str | None = None
    boxes: bool = True
    decode_paths: tuple[str, ...] = ("e2e", "nms")
    eval_options: tuple[EvalOption, ...] = ()
    read_split: Callable[..., Any] | None = None
    build_model: Callable[..., Any] | None = None
    build_criterion: Callable[..., Any] | None = None
    decode: Callable[..., Any] | None = None
    make_synthetic: Callable[..., Any] | None = None
    build_metric: Callable[..., Any] | None = None
    metric_update: Callable[..., Any] | None = None
    gate: GateSpec | None = None
    evaluate: Callable[..., Any] | None = None
    predict: Callable[..., Any] | None = None
    draw: Callable[..., Any] | None = None
    export: ExportSpec | None = None
    transfer_weights: Callable[..., Any] | None = None
    label_stats: Callable[..., Any] | None = None
    matches: Callable[..., Any] | None = None
    label_lines: Callable[..., Any] | None = None
    coco_results: Callable[..., Any] | None = None
    target_rows: Callable[..., Any] | None = None
    inference_view: Callable[..., Any] | None = None
    published_models: tuple[str, ...] = ()
    published_meta: Callable[..., Any] | None = None
    roles: Any = None
    """The :class:`~lucidyolo.tasks.api_roles.Task` this record was compiled from (``None`` in a 2.x plugin's own)."""

    HOOKS = (
        "read_split", "build_model", "build_criterion", "decode", "make_synthetic", "build_metric", "metric_update",
        "evaluate", "predict", "draw", "transfer_weights", "label_stats", "matches", "label_lines", "coco_results",
        "target_rows", "inference_view", "published_meta",
    )
    """Every callable hook (``gate`` and ``export`` are specs holding callables)."""

    FIT_HOOKS = ("build_model", "build_criterion", "decode", "build_metric", "metric_update")
    """The hooks ``lucid fit`` needs."""

    @property
    def run_config(self) -> type[RunConfig]:
        """The task's run config class: ``config_model`` validates the ``model`` section, and the schema's
        rules that follow from the capabilities (one device and one process when ``multi_device`` is False)
        are its validators, so every config of the task (CLI, ``--resume``, restore, Python) meets them."""
        return run_config_class(self.name, self.config_model, self.capabilities.multi_device,
                                self.config_data, self.config_trainer, tuple(self.layouts))

    @property
    def trainable(self) -> bool:
        """True when every hook ``lucid fit`` needs is provided and a primary metric is declared."""
        return not self.missing_hooks(*self.FIT_HOOKS) and self.metrics.monitor is not None

    @property
    def default_decode_path(self) -> str:
        """The first of :attr:`decode_paths`: validation, batch pictures and ``lucid predict`` decode with it."""
        return self.decode_paths[0]

    def eval_option(self, name: str) -> EvalOption | None:
        """The declared evaluation option ``name``, or ``None``."""
        return next((o for o in self.eval_options if o.name == name), None)

    def missing_hooks(self, *names: str) -> list[str]:
        """Names among ``names`` whose hook is ``None``."""
        return [n for n in names if getattr(self, n) is None]


def api_version_problem(version: Any) -> tuple[str, str] | None:
    """``None`` when ``version`` is compatible; else ``("error"|"warning", message)``.

    A plugin built for version 1 declared a bare ``int``; since version 2 it is ``(major, minor)``.
    Majors in :data:`ADAPTED_MAJORS` load through the adapter, with no warning (supported).
    """
    ours = f"{PLUGIN_API_VERSION[0]}.{PLUGIN_API_VERSION[1]}"
    if isinstance(version, int) and not isinstance(version, bool):
        version = (version, 0)
    if not (isinstance(version, tuple) and len(version) == 2 and all(isinstance(v, int) for v in version)):
        return "error", f"api_version {version!r} is not a (major, minor) tuple (lucidyolo speaks plugin API {ours})"
    major, minor = version
    if major in ADAPTED_MAJORS:
        return None
    if major != PLUGIN_API_VERSION[0]:
        adapted = ", ".join(f"{m}.x" for m in ADAPTED_MAJORS)
        return "error", (
            f"the plugin was built for plugin API {major}.{minor}, but lucidyolo speaks plugin API {ours} "
            f"(and {adapted} through its adapter); install a plugin release built for this lucidyolo, "
            "or the lucidyolo the plugin was built for"
        )
    if minor > PLUGIN_API_VERSION[1]:
        return "warning", (
            f"the plugin was built for plugin API {major}.{minor}, newer than this lucidyolo's {ours}; "
            "hooks added since may be ignored (upgrade lucidyolo)"
        )
    return None
