"""The hooks of ``my_task``: stubs to replace, one per hook of the plugin API.

This module is imported only when a hook is first called (``task.py`` names
the hooks as lazy strings), so it may import torch at the top once it needs to.

The engine calls every hook with keyword arguments and may add arguments in a
later minor API version: keep the ``**_`` catch-all. Full contracts and tensor
shapes: ``lucidyolo/tasks/api.py``. After writing a hook, add its name to
``IMPLEMENTED`` in ``task.py``.
"""

from __future__ import annotations

from typing import Any

REFERENCE = "plugins/lucidyolo-cls"
"""A complete first-party plugin (image classification) in the lucid-yolo repository."""


def _todo(hook: str) -> NotImplementedError:
    return NotImplementedError(
        f"my_task.hooks.{hook} is a template stub: write it (contract: lucidyolo/tasks/api.py, "
        f"hook {hook}; complete examples: {REFERENCE}, image classification, and tests/point_plugin)"
    )


def read_split(root: Any, split: str, fields: tuple[str, ...], layout: Any, explicit_paths: dict[str, Any],
               **_: Any) -> Any:
    """One split of a dataset layout the built-in COCO / YOLO / DOTA readers do not know, as an ``ImageSource``.

    Leave it out (not in ``IMPLEMENTED``) to read COCO, YOLO or DOTA roots with the built-in readers.
    A split that must not be trained on as it is can say so: set ``source.fit_checks`` to callables
    ``check(source, img_size)`` that raise ``DataError``; ``lucid fit`` runs them on the training split.
    """
    raise _todo("read_split")


def build_model(cfg: Any, num_classes: int, meta: dict[str, Any], **_: Any) -> Any:
    """``torch.nn.Module`` mapping images ``(B, 3, H, W)`` float in ``[0, 1]`` to an output dict.

    ``cfg`` is the validated ``MyTaskConfig``; ``meta`` holds ``TaskSpec.meta_keys``.
    """
    raise _todo("build_model")


def build_criterion(cfg: Any, num_classes: int, meta: dict[str, Any], **_: Any) -> Any:
    """Module with ``criterion(outputs, gt, alpha) -> (total, terms)``.

    ``total`` is a scalar tensor; ``terms`` a dict of scalar tensors keyed by
    ``TaskSpec.loss_terms``.
    """
    raise _todo("build_criterion")


def decode(outputs: dict[str, Any], path: str, cfg: Any, **_: Any) -> Any:
    """The model output to the task's prediction tensor; ``path`` is one of ``TaskSpec.decode_paths``
    (``cfg``: the run's model config, API 2.5)."""
    raise _todo("decode")


def build_metric(cfg: Any, num_classes: int, meta: dict[str, Any], **_: Any) -> Any:
    """A ``torchmetrics.Metric`` whose ``compute()`` returns ``TaskSpec.metrics.keys`` without ``val/``
    (``cfg``: the run's model config, API 2.5)."""
    raise _todo("build_metric")


def metric_update(metric: Any, outputs: dict[str, Any], decoded: Any, gt: dict[str, Any],
                  batch_meta: dict[str, Any], **_: Any) -> None:
    """Feed one validation batch (``decoded`` decoded on the first of ``decode_paths``) to the metric."""
    raise _todo("metric_update")


def make_synthetic(out_dir: Any, num_images: int, img_size: int, seed: int, **_: Any) -> Any:
    """Write a small synthetic dataset (real files) and return a root the readers accept."""
    raise _todo("make_synthetic")


def evaluate(model: Any, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
             limit: int | None, options: dict[str, Any], paths: tuple[str, ...], cfg: Any, **_: Any) -> dict[str, Any]:
    """``lucid eval``: ``{"paths": {path: {kind: stats}}, "timings": {...}, "results": {...}}``, one per ``paths``.

    ``options`` holds each of ``TaskSpec.eval_options`` by name (default or given).
    """
    raise _todo("evaluate")


def predict(decoded: Any, image_hw: tuple[int, int], letterbox: tuple[float, float, float],
            class_names: list[str], conf: float, cfg: Any, **_: Any) -> list[dict[str, Any]]:
    """One image's decoded rows to JSON-able dicts in original-image pixels, filtered by ``conf``
    (``cfg``: the run's model config, API 2.5)."""
    raise _todo("predict")


def draw(image: Any, predictions: list[dict[str, Any]], class_names: list[str], **_: Any) -> Any:
    """``predict``'s dicts drawn on an ``(H, W, 3)`` uint8 RGB image; returns a ``PIL.Image.Image``."""
    raise _todo("draw")


def target_rows(gt: Any, image_hw: Any, class_names: list[str], meta: dict[str, Any], **_: Any) -> list[list[dict[str, Any]]]:
    """A batch's ground truth as ``draw``'s dicts, one list per image (network-input pixels, ``"score"`` NaN), optional.

    With it and ``draw``, ``lucid fit`` writes ``train_batch*.jpg`` and ``val_batch*_labels/_pred.jpg``.
    """
    raise _todo("target_rows")


def transfer_weights(source: dict[str, Any], target: dict[str, Any], class_map: list[int], source_meta: dict[str, Any],
                     meta: dict[str, Any], **_: Any) -> dict[str, Any]:
    """Tensors of your own that need more than the generic rule (e.g. per-keypoint rows): ``{name: tensor or reason}``."""
    raise _todo("transfer_weights")


def label_stats(instances: dict[str, Any], image_index: Any, image_hw: Any, class_names: list[str],
                meta: dict[str, Any], **_: Any) -> dict[str, dict[str, Any]]:
    """Your own panels of ``labels.png`` (histogram / bar data over the training split's labels), optional.

    Leave it out to get the engine's panels only (instances per class, box centres and sizes).
    """
    raise _todo("label_stats")


def matches(metric: Any, **_: Any) -> dict[str, Any]:
    """What your epoch metric matched, for the PR / F1 curves and confusion matrices of ``lucid fit``, optional.

    Return ``{"B": lucidyolo.metrics.matches.Matches(...)}`` (one per IoU type, keyed by
    the letter of your ``results.csv`` columns) read from the metric's own matching, or
    leave it out: no curves.
    """
    raise _todo("matches")


def label_lines(predictions: list[dict[str, Any]], image_hw: tuple[int, int], class_names: list[str],
                meta: dict[str, Any], **_: Any) -> list[str]:
    """``lucid predict --save-txt``: one image's ``predict`` dicts as YOLO-style lines ending in the confidence, optional.

    ``lucidyolo.predict.label_lines.format_line`` formats a row; leave the hook out and ``--save-txt`` refuses.
    """
    raise _todo("label_lines")


def coco_results(predictions: list[dict[str, Any]], image_id: int, image_hw: tuple[int, int], class_names: list[str],
                 meta: dict[str, Any], **_: Any) -> list[dict[str, Any]]:
    """``lucid predict --save-json``: one image's ``predict`` dicts as COCO results dicts, optional.

    Leave it out when your task has no COCO results form (``--save-json`` then refuses with exit code 2).
    """
    raise _todo("coco_results")


def inference_view(model: Any, paths: tuple[str, ...], device: Any, fold: bool, **_: Any) -> Any:
    """Optional (API 2.4): the eval-mode, gradient-free copy of ``model`` on ``device`` that
    ``lucid eval`` / ``lucid predict`` run for ``paths`` (``fold``: BatchNorm folded). Leave it
    out of ``IMPLEMENTED`` and lucid runs a BN-folded copy of the whole model."""
    raise _todo("inference_view")


def published_meta(checkpoint: Any, **_: Any) -> dict[str, Any]:
    """Optional (API 2.6): the dataset meta a published YOLO26 checkpoint of one of ``SPEC.published_models``
    implies. Leave it out unless your task reads the publisher's files and needs meta from them."""
    raise _todo("published_meta")
