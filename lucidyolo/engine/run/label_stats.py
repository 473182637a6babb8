"""Label statistics of the training split: the numbers behind ``labels.json`` and ``labels.png``.

``lucid fit`` writes both into the run folder before the first training step
(global rank 0 only). Every task gets the same generic numbers: instances per
class, and where there are boxes, the distributions of box centres and sizes
(normalised by the image size) and the instances per image. A task adds its own
panels through the optional ``TaskSpec.label_stats`` hook (keypoint visibility,
angles, polygon vertices); a task without instances but with a class per image
(classification) gets images per class.

The labels come from :meth:`~lucidyolo.data.source.ImageSource.all_instances`
(no image is decoded) and every figure is one numpy call over the joined arrays:
no loop over instances, so a COCO-size split costs tens of milliseconds.
Numbers only: drawing lives in :mod:`lucidyolo.engine.run.label_plots`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.data.source import ImageSource

GRID = 20
"""Bins per axis of the box centre and size histograms (0.05 of the image side each)."""

PANEL_KINDS = {
    "bars": ("categories", "series"),
    "histogram": ("edges", "counts"),
    "histogram2d": ("x_edges", "y_edges", "counts"),
}
"""The panel kinds one generic function draws, with their required data keys (``TaskSpec.label_stats``)."""


def label_statistics(
    source: ImageSource, hook: Callable[..., Any] | None = None, meta: Mapping[str, Any] | None = None,
    boxes: bool = True,
) -> dict[str, Any]:
    """The label statistics of one split, JSON-able.

    Args:
        source: the split (its labels are read; no image is decoded).
        hook: the task's ``label_stats`` hook, or ``None`` for the generic panels only.
        meta: the dataset meta handed to the hook (``num_keypoints``, ``flip_idx``).
        boxes: the task's instances have boxes (``TaskSpec.boxes``): the box
            centre and size panels are drawn.

    Returns:
        ``{"split", "images", "classes" (C names), "counted" ("instances" or
        "images"), "per_class" (C,), "instances", "images_without_instances",
        "instances_per_image" ({"mean", "max"}), "panels" ({name: panel})}``;
        the three instance figures are ``None`` when per-class counts are images
        (a split without instances whose images carry a class). Panels hold plain
        lists (see ``TaskSpec.label_stats`` in :mod:`lucidyolo.tasks.api`).
    """
    targets, image_index = source.all_instances()
    hw = source.all_hw()  # (N, 2) h, w
    names = list(source.class_names)
    n_images, m = len(source), len(targets)
    stats: dict[str, Any] = {"split": source.name, "images": n_images, "classes": names}
    panels: dict[str, dict[str, Any]] = {}
    image_classes = source.image_class_counts() if m == 0 else None
    if image_classes is not None:
        # no instance to count, one class per image: images per class is what the labels say
        stats.update(counted="images", per_class=image_classes.tolist(), instances=None,
                     images_without_instances=None, instances_per_image=None)
        panels["classes"] = _class_panel(names, image_classes, "images")
    else:
        per_class = np.bincount(targets.labels, minlength=len(names))  # (C,)
        per_image = np.bincount(image_index, minlength=n_images)  # (N,)
        stats.update(
            counted="instances", per_class=per_class.tolist(), instances=m,
            images_without_instances=int((per_image == 0).sum()),
            instances_per_image={"mean": float(per_image.mean()) if n_images else 0.0,
                                 "max": int(per_image.max(initial=0))},
        )
        panels["classes"] = _class_panel(names, per_class, "instances")
        if m and boxes:
            wh = hw[image_index][:, ::-1].astype(np.float64)  # (M, 2) image w, h of each instance
            b = targets.boxes.astype(np.float64)  # (M, 4) xyxy px
            # clipped so every instance lands in a bin (a box may overhang its image by a rounding error)
            centre = ((b[:, :2] + b[:, 2:]) / 2 / wh).clip(0, 1)  # (M, 2)
            size = ((b[:, 2:] - b[:, :2]) / wh).clip(0, 1)  # (M, 2)
            panels["box_centre"] = _histogram2d(centre, "box centres (normalised)", "x", "y", y_down=True)
            panels["box_size"] = _histogram2d(size, "box sizes (normalised)", "width", "height")
    if hook is not None:
        instances = {"boxes": targets.boxes, "labels": targets.labels, "difficult": targets.difficult, **targets.extra}
        extra = hook(instances=instances, image_index=image_index, image_hw=hw, class_names=names, meta=dict(meta or {}))
        for name, panel in (extra or {}).items():
            if name in panels:
                raise ValueError(f"label_stats panel {name!r} clashes with an engine panel ({sorted(panels)})")
            panels[name] = checked_panel(name, panel)
    stats["panels"] = panels
    return stats


def checked_panel(name: str, panel: Mapping[str, Any]) -> dict[str, Any]:
    """``panel`` with its arrays as lists, after checking its kind and array lengths; ``ValueError`` otherwise."""
    kind = panel.get("kind")
    if kind not in PANEL_KINDS:
        raise ValueError(f"label_stats panel {name!r}: kind {kind!r} is not one of {sorted(PANEL_KINDS)}")
    missing = [k for k in PANEL_KINDS[kind] if k not in panel]
    if missing:
        raise ValueError(f"label_stats panel {name!r} ({kind}) lacks {missing}")
    out = {k: _plain(v) for k, v in panel.items()}
    out.setdefault("title", name)
    if kind == "bars":
        n = len(out["categories"])
        out["categories"] = [str(c) for c in out["categories"]]
        bad = [s for s, v in out["series"].items() if len(v) != n]
        if bad:
            raise ValueError(f"label_stats panel {name!r}: series {bad} do not have {n} values (one per category)")
    elif kind == "histogram":
        if len(out["edges"]) != len(out["counts"]) + 1:
            raise ValueError(f"label_stats panel {name!r}: {len(out['edges'])} edges for {len(out['counts'])} bins")
    elif np.shape(out["counts"]) != (len(out["x_edges"]) - 1, len(out["y_edges"]) - 1):
        raise ValueError(f"label_stats panel {name!r}: counts {np.shape(out['counts'])} do not match the edges")
    return out


def write_label_stats(stats: Mapping[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``labels.json`` and ``labels.png`` into ``out_dir`` atomically; returns ``(png, json)``.

    The picture of statistics drawn before (the same ``labels.json``, lucid, drawer and matplotlib)
    is copied from the label index's folder instead of drawn again: the next start on a dataset
    skips matplotlib (~0.6 s). Without an index folder (``LUCIDYOLO_LABEL_INDEX=off``) it is drawn.
    """
    from lucidyolo.engine.run.label_plots import draw_label_stats

    out = Path(out_dir)
    target = out / "labels.json"
    text = json.dumps(stats, indent=1) + "\n"
    with atomic_open(target, "w", encoding="utf-8") as f:
        f.write(text)
    png = out / "labels.png"
    drawn = _drawn_before(text)
    if drawn is not None and drawn.is_file():
        try:
            data = drawn.read_bytes()
        except OSError:
            data = b""
        if data.startswith(b"\x89PNG"):
            with atomic_open(png, "wb") as f:
                f.write(data)
            return png, target
    draw_label_stats(stats, png)
    if drawn is not None:
        _keep_drawing(png, drawn)
    return png, target


KEPT_DRAWINGS = 64
"""Pictures kept for later starts (the least recently written go first); ~100 KB each."""


def _drawn_before(text: str) -> Path | None:
    """Where the picture of ``labels.json`` text ``text`` is kept (``None``: the label index is off)."""
    import hashlib
    import importlib.metadata

    from lucidyolo._version import __version__
    from lucidyolo.data.label_index import index_folder
    from lucidyolo.engine.run import label_plots

    folder = index_folder()
    if folder is None:
        return None
    try:
        drawer = f"{Path(label_plots.__file__).stat().st_mtime_ns} {importlib.metadata.version('matplotlib')}"
    except (OSError, importlib.metadata.PackageNotFoundError):
        return None
    key = hashlib.sha256(f"{__version__} {drawer}\n{text}".encode()).hexdigest()[:24]
    return folder / "label-plots" / f"{key}.png"


def _keep_drawing(png: Path, kept: Path) -> None:
    """Copy a new picture beside the index (never fatal: the next start draws it again)."""
    try:
        with atomic_open(kept, "wb") as f:
            f.write(png.read_bytes())
        pictures = sorted(kept.parent.glob("*.png"), key=lambda p: p.stat().st_mtime_ns)
        for old in pictures[:-KEPT_DRAWINGS]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def summary_line(stats: Mapping[str, Any], png: Path) -> str:
    """The fit log's line: where the picture is and what it counts."""
    counted = stats["instances"] if stats["counted"] == "instances" else sum(stats["per_class"])
    return f"label statistics: {png} ({len(stats['classes'])} classes, {counted} {stats['counted']})"


def _class_panel(names: list[str], counts: np.ndarray, unit: str) -> dict[str, Any]:
    return {"kind": "bars", "title": f"{unit} per class", "categories": list(names),
            "series": {unit: counts.tolist()}, "ylabel": unit}


def _histogram2d(xy: np.ndarray, title: str, xlabel: str, ylabel: str, y_down: bool = False) -> dict[str, Any]:
    """``xy (M, 2)`` in ``[0, 1]`` binned on a ``GRID x GRID`` grid; ``counts[i][j]``: x bin i, y bin j."""
    edges = np.linspace(0.0, 1.0, GRID + 1)
    counts, _, _ = np.histogram2d(xy[:, 0], xy[:, 1], bins=(edges, edges))
    panel = {"kind": "histogram2d", "title": title, "x_edges": edges.tolist(), "y_edges": edges.tolist(),
             "counts": counts.astype(np.int64).tolist(), "xlabel": xlabel, "ylabel": ylabel}
    if y_down:  # image coordinates: y grows downwards, so the picture looks like the images
        panel["y_down"] = True
    return panel


def _plain(value: Any) -> Any:
    """numpy arrays and scalars (also inside dicts and lists) as Python lists and numbers, for JSON."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
