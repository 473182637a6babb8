"""The hooks of the ``cls`` task (imported on first use through ``lazy_hook``; uses torch).

Each function implements one hook of :class:`lucidyolo.tasks.api.TaskSpec`
(plugin API 2.0); lucidyolo calls them with keyword arguments, so every one
accepts ``**_`` for arguments added in later minor versions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lucidyolo_cls_v2_4.fields import NAME
from lucidyolo_cls_v2_4.metric import TopKAccuracy
from lucidyolo_cls_v2_4.model import Classifier, DeployedClassifier

FIELDS = (NAME,)
TOP_K = 5


def build_model(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    return Classifier(cfg.variant, num_classes, dropout=cfg.dropout)


class ClassificationLoss(nn.Module):
    """Cross-entropy with label smoothing on ``gt["image_class"] (B,)``; ``alpha`` (dual-branch weight) is unused."""

    def __init__(self, label_smoothing: float) -> None:
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, outputs: Mapping[str, Tensor], gt: Mapping[str, Tensor], alpha: float = 0.0) -> tuple[Tensor, dict[str, Tensor]]:
        target = gt[NAME]
        known = target >= 0
        ce = nn.functional.cross_entropy(
            outputs["logits"][known], target[known], label_smoothing=self.label_smoothing
        ) if bool(known.any()) else outputs["logits"].sum() * 0.0
        return ce, {"ce": ce.detach()}


def build_criterion(cfg: Any, num_classes: int, **_: Any) -> nn.Module:
    return ClassificationLoss(cfg.label_smoothing)


def decode(outputs: Mapping[str, Tensor], path: str = "e2e", **_: Any) -> Tensor:
    """``(B, C)`` class probabilities; ``path`` is the task's one decode path, ``"e2e"``."""
    return torch.softmax(outputs["logits"].float(), dim=-1)


def build_metric(num_classes: int, **_: Any) -> nn.Module:
    return TopKAccuracy(num_classes)


def metric_update(metric: Any, decoded: Tensor, gt: Mapping[str, Tensor], **_: Any) -> None:
    metric.update(decoded, gt[NAME])


def matches(metric: Any, **_: Any) -> dict[str, Any]:
    """``{"C": Matches}``: every image's top-1 prediction of the epoch (what top-1 accuracy counted)."""
    from lucidyolo_cls_v2_4.metric import top1_matches

    return {"C": top1_matches(metric.last_rows, metric.num_classes)} if metric.last_rows is not None else {}


def evaluate(*, model: nn.Module, decode: Any, source: Any, img_size: int, batch_size: int, device: Any,
             limit: int | None, paths: Sequence[str] = ("e2e",), **_: Any) -> dict[str, Any]:
    """Top-1 / top-5 accuracy of the split, with one prediction row per image, for the task's one decode path."""
    from lucidyolo.data.val_batches import val_batches

    path = paths[0]
    metric = TopKAccuracy(source.num_classes)
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    model.to(device).eval()
    with torch.inference_mode():
        for images, gt, meta in val_batches(source, img_size, batch_size, FIELDS, device, limit=limit):
            probs = decode(outputs=model(images), path=path).cpu()
            target = gt[NAME].cpu()
            metric.update(probs, target)
            for i in range(probs.shape[0]):
                score, label = probs[i].max(dim=-1)
                rows.append({"image_id": source.image_id(int(meta["index"][i])), "label": int(label),
                             "score": float(score), "target": int(target[i])})
    stats = {k: float(v) for k, v in metric.compute().items()}
    return {
        "paths": {path: {"classification": {"stats": stats}}},
        "timings": {"predict_s": time.perf_counter() - t0},
        "results": {path: rows},
        "num_images": len(rows),
    }


def predict(decoded: Tensor, class_names: Sequence[str], conf: float = 0.0, **_: Any) -> list[dict[str, Any]]:
    """The top-5 classes of one image (``decoded (C,)`` probabilities), best first, at or above ``conf``."""
    scores, labels = decoded.float().topk(min(TOP_K, decoded.shape[-1]))
    return [
        {"rank": r + 1, "label": int(c), "name": class_names[int(c)] if int(c) < len(class_names) else str(int(c)),
         "score": round(float(s), 4)}
        for r, (s, c) in enumerate(zip(scores.tolist(), labels.tolist(), strict=True)) if s >= conf
    ]


def label_lines(predictions: Sequence[Mapping[str, Any]], **_: Any) -> list[str]:
    """``label conf`` per ranked class, best first (an image has no geometry; there is no COCO results form,
    so the plugin gives no ``coco_results`` and ``--save-json`` refuses)."""
    from lucidyolo.predict.label_lines import format_line

    return [format_line(int(p["label"]), (), p["score"]) for p in predictions]
def target_rows(gt: Mapping[str, Tensor], class_names: Sequence[str], **_: Any) -> list[list[dict[str, Any]]]:
    """Each image's labelled class (``gt["image_class"] (B,)``, -1 unknown: no row) as a :func:`predict` dict,
    ``"score"`` NaN (a label has none)."""
    return [
        [{"rank": 1, "label": int(c), "name": class_names[int(c)] if int(c) < len(class_names) else str(int(c)),
          "score": float("nan")}] if int(c) >= 0 else []
        for c in gt[NAME].cpu().tolist()
    ]


def draw(image: np.ndarray, predictions: Sequence[Mapping[str, Any]], class_names: Sequence[str], **_: Any) -> Any:
    """The top classes written in the image's top-left corner (a label, whose score is NaN, by its name alone)."""
    import math

    from PIL import Image, ImageDraw

    out = Image.fromarray(image)
    d = ImageDraw.Draw(out)
    for i, p in enumerate(predictions[:3]):
        text = p["name"] if math.isnan(p["score"]) else f"{p['name']} {p['score']:.2f}"
        d.rectangle((0, 12 * i, d.textlength(text) + 4, 12 * i + 11), fill=(0, 0, 0))
        d.text((2, 12 * i), text, fill=(255, 255, 255))
    return out


def deploy(model: nn.Module, **_: Any) -> nn.Module:
    return DeployedClassifier(model)  # type: ignore[arg-type]


def export_check(deployed: nn.Module, onnx_path: Path, images: Tensor, **_: Any) -> dict[str, Any]:
    """The exported file (ONNX, TorchScript or OpenVINO, run by lucid's runtime for it) against PyTorch:
    same top-1 class and probabilities within 1e-4."""
    from lucidyolo.export.formats import run_exported

    with torch.no_grad():
        expected = deployed(images).float().cpu().numpy()
    got = run_exported(onnx_path, images)[0].numpy()
    diff = float(np.abs(expected - got).max())
    same = bool((expected.argmax(-1) == got.argmax(-1)).all())
    return {"max_prob_diff": diff, "top1_equal": same, "passed": same and diff <= 1e-4,
            "summary": f"top-1 equal {same}, max probability difference {diff:.1e}"}
