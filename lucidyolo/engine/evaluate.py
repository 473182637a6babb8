"""``lucid eval``: the COCO protocol through pycocotools for both decode paths from one forward."""

from __future__ import annotations

import hashlib
import json
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from lucidyolo.cli.console import console, info
from lucidyolo.errors import NotAvailableError, UserError

TASK_DEFAULTS = {"obb": (1024, 8)}
"""Per-task default (img_size, batch_size); others use (640, 32)."""


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


def pick_device(device: str) -> Any:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise UserError(f"--device {device!r} is not a device name.", fix="Use cpu, cuda, cuda:N or auto.") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {device} asks for CUDA, which this machine does not have.", fix="Use --device cpu.")
    return dev


def predict_split(model: Any, spec: Any, source: Any, img_size: int, batch_size: int, device: Any, limit: int | None) -> tuple[dict[str, list[dict[str, Any]]], dict[str, float]]:
    """Run the model over a split; COCO results (original pixels, dataset ids) per decode path."""
    import torch

    from lucidyolo.data.datasets import ValDataset
    from lucidyolo.data.loader import build_val_loader
    from lucidyolo.metrics.coco_eval import dets_to_coco_results
    from lucidyolo.structures.packed import unpack

    dataset: Any = ValDataset(source, img_size)
    if limit is not None:
        dataset = _FirstItems(dataset, limit)
    loader = build_val_loader(dataset, batch_size, spec.name, val_num_workers=min(2, batch_size))
    results: dict[str, list[dict[str, Any]]] = {"e2e": [], "nms": []}
    t_forward = t_decode = 0.0
    model.to(device)
    with torch.inference_mode():
        for batch in loader:
            images, _, meta = unpack(batch, device)
            t0 = time.perf_counter()
            outputs = model(images)
            t1 = time.perf_counter()
            decoded = {path: spec.decode(outputs, path).cpu() for path in ("e2e", "nms")}
            t_forward += t1 - t0
            t_decode += time.perf_counter() - t1
            for i in range(images.shape[0]):  # per image: only the result dicts, after the batched decode
                index = int(meta["index"][i])
                scale, pad_x, pad_y = (float(v) for v in meta["letterbox"][i])
                hw = (int(meta["orig_hw"][i, 0]), int(meta["orig_hw"][i, 1]))
                for path, dets in decoded.items():
                    results[path] += dets_to_coco_results(
                        dets[i], source.image_id(index), source.category_ids, scale, pad_x, pad_y, hw
                    )
    return results, {"forward_s": t_forward, "decode_s": t_decode}


class _FirstItems:
    """The first ``n`` items of a dataset (the sampler yields ``(epoch, index)`` pairs, which Subset rejects)."""

    def __init__(self, dataset: Any, n: int) -> None:
        self.dataset = dataset
        self.n = max(0, min(n, len(dataset)))
        self.img_size = dataset.img_size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: Any) -> Any:
        return self.dataset[item]


def run_eval(
    checkpoint: Path, data_root: Path | None = None, split: str = "val", ema: bool = True, masks: bool = True,
    img_size: int | None = None, batch_size: int | None = None, device: str = "auto", limit: int | None = None,
    output: Path | None = None, save_json: Path | None = None, task: str | None = None,
) -> dict[str, Any]:
    """Score a checkpoint; returns the report dict (also written to ``output``)."""
    from lucidyolo.engine.fit import quiet_known_warnings

    quiet_known_warnings()
    t_start = time.perf_counter()
    from lucidyolo.data.coco_gt import build_coco_gt
    from lucidyolo.engine.build import data_root_of, open_split
    from lucidyolo.engine.restore import restore
    from lucidyolo.metrics.coco_eval import evaluate_coco, save_results_json

    restored = restore(checkpoint, ema=ema, task=task)
    spec, cfg = restored.spec, restored.config
    if spec.name != "det":
        raise NotAvailableError(f"`lucid eval` for task {spec.name!r} is not built yet.", fix="Nothing was run.")
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
    size_default, batch_default = TASK_DEFAULTS.get(spec.name, (640, 32))
    img_size = img_size or size_default
    if img_size % 32:
        raise UserError(f"--img-size {img_size} is not a multiple of 32.", fix="Use e.g. 640.")
    dev = pick_device(device)
    t_pred = time.perf_counter()
    results, timing = predict_split(
        restored.model, spec, source, img_size, batch_size or batch_default, dev, limit
    )
    timing["predict_s"] = time.perf_counter() - t_pred
    gt = build_coco_gt(source)
    if limit is not None:
        keep = {source.image_id(i) for i in range(min(limit, len(source)))}
        gt = {**gt, "images": [im for im in gt["images"] if im["id"] in keep],
              "annotations": [a for a in gt["annotations"] if a["image_id"] in keep]}
    paths: dict[str, Any] = {}
    for path, dets in results.items():
        res = evaluate_coco(gt, dets, iou_type="bbox")
        paths[path] = {"bbox": res.to_dict()}
        timing[f"cocoeval_{path}_s"] = res.timings.get("total", 0.0)
    if save_json is not None:
        save_results_json(results["e2e"], save_json)
        save_results_json(results["nms"], save_json.with_name(save_json.stem + "_nms" + save_json.suffix))
    timing["total_s"] = time.perf_counter() - t_start
    report = {
        "task": spec.name,
        "checkpoint": str(checkpoint),
        "checkpoint_sha256": sha256_of(checkpoint),
        "weights": "ema" if restored.used_ema else "raw",
        "data_root": str(root),
        "split": split,
        "num_images": len(gt["images"]),
        "img_size": img_size,
        "engine": "pycocotools",
        "versions": library_versions(),
        "config": cfg.model_dump(mode="json"),
        "paths": paths,
        "timings": timing,
    }
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(report, indent=2))
    _print_report(report)
    return report


def _class_names_of(restored: Any) -> list[str]:
    names = restored.checkpoint.get("lucid", {}).get("class_names")
    return list(names) if names else []


def _print_report(report: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"lucid eval {report['task']}: {report['num_images']} images ({report['weights']} weights)")
    table.add_column("stat")
    for path in report["paths"]:
        table.add_column(path, justify="right")
    names = list(next(iter(report["paths"].values()))["bbox"]["stats"])
    for name in names:
        table.add_row(name, *(f"{p['bbox']['stats'][name]:.4f}" for p in report["paths"].values()))
    console.print(table)
    info(f"timings: {', '.join(f'{k} {v:.2f}' for k, v in report['timings'].items())}")
