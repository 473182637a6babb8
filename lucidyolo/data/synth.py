"""Synthetic shapes dataset: real image files + COCO JSON or a YOLO root, for every field a task reads.

Scenes are coloured objects on a noisy, textured background. The set is
deliberately learnable by a tiny model in minutes on a CPU: each class has its
own shape *and* hue, objects span 8-40 % of the image side and barely
overlap. Used by tests, the overfit gates and the default ``lucid fit`` run;
it goes through exactly the same readers as real data.

What the objects are is a :class:`~lucidyolo.data.synth_scene.SyntheticScene`:
the first of the task's fields with a ``synth`` rule names it (rotated bars,
keypoint symbols, shapes labelled by their outlines live in their task
packages); without one it is :data:`SHAPES`: circles (red), squares (green),
triangles (blue) and hexagons (yellow) labelled by their boxes.

Every image is drawn from its own generator seeded by ``(seed, index)``, so
the output is byte-reproducible and image ``i`` does not depend on the count.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from lucidyolo.data.layouts import ann_prefix
from lucidyolo.data.synth_scene import Drawn, SyntheticScene, clipped_ring, scene_of
from lucidyolo.errors import DataError
from lucidyolo.structures.fields import FieldSpec, registered_fields

SHAPE_CLASSES = ["circle", "square", "triangle", "hexagon"]
_HUES = np.array([[220, 40, 40], [40, 190, 60], [40, 80, 230], [235, 210, 40]], np.float64)
_FORMATS = ("coco", "yolo")
_MARKER = ".lucid_synth.json"


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Muted texture: a coarse random field upsampled plus per-pixel noise. (S, S, 3) uint8."""
    g = int(rng.integers(3, 8))
    coarse = rng.uniform(70, 170, size=(g, g, 3)).astype(np.float32)
    tex = np.asarray(Image.fromarray(coarse.astype(np.uint8)).resize((size, size), Image.BILINEAR), np.float32)
    grey = tex.mean(-1, keepdims=True)
    tex = 0.6 * grey + 0.4 * tex  # desaturate so class hues stand out
    tex += rng.normal(0, 12, size=(size, size, 1)).astype(np.float32)
    return np.clip(tex, 0, 255).astype(np.uint8)


def _regular(n: int, cx: float, cy: float, r: float, rot: float) -> np.ndarray:
    a = rot + np.arange(n) * 2 * np.pi / n
    return np.stack([cx + r * np.cos(a), cy + r * np.sin(a)], 1)


def _place(rng: np.random.Generator, size: int, placed: list[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """Centre and radius of a new object that barely overlaps the placed ones."""
    for _ in range(40):
        side = rng.uniform(0.08, 0.40) * size
        r = side / 2
        cx, cy = rng.uniform(r, size - r, size=2)
        if all(np.hypot(cx - x, cy - y) > 0.9 * (r + q) for x, y, q in placed):
            return float(cx), float(cy), float(r)
    return None


def _shape_ring(label: int, cx: float, cy: float, r: float, rot: float) -> np.ndarray:
    if label == 0:
        return _regular(32, cx, cy, r, 0.0)
    if label == 1:
        return _regular(4, cx, cy, r, rot + np.pi / 4)
    if label == 2:
        return _regular(3, cx, cy, r, rot - np.pi / 2)
    return _regular(6, cx, cy, r, rot)


def _draw_shape(draw: ImageDraw.ImageDraw, rng: np.random.Generator, cx: float, cy: float, r: float, rot: float,
                label: int, colour: tuple[int, ...], size: int) -> Drawn:
    ring = _shape_ring(label, cx, cy, r, rot)
    draw.polygon([tuple(p) for p in ring], fill=colour)
    return Drawn(label, ring)


SHAPES = SyntheticScene(names=tuple(SHAPE_CLASSES), draw=_draw_shape)
"""The default scene: the four shapes, labelled by their boxes."""


def _specs(fields: tuple[str, ...]) -> tuple[FieldSpec, ...]:
    """The registered fields among ``fields``, in their order (an unknown name draws nothing of its own)."""
    known = {f.name: f for f in registered_fields()}
    return tuple(known[n] for n in fields if n in known)


def _paint(scene: SyntheticScene, size: int, rng: np.random.Generator) -> tuple[np.ndarray, list[Drawn]]:
    """One image ``(S, S, 3)`` uint8 and its objects."""
    img = Image.fromarray(_background(rng, size))
    draw = ImageDraw.Draw(img)
    objs: list[Drawn] = []
    placed: list[tuple[float, float, float]] = []
    for _ in range(int(rng.integers(1, 6))):
        spot = _place(rng, size, placed)
        if spot is None:
            break
        cx, cy, r = spot
        placed.append(spot)
        label = int(rng.integers(0, len(scene.names)))
        colour = tuple(int(v) for v in np.clip(_HUES[label] + rng.normal(0, 12, 3), 0, 255))
        rot = float(rng.uniform(0, 2 * np.pi))
        objs.append(scene.draw(draw, rng, cx, cy, r, rot, label, colour, size))
    return np.asarray(img), objs


def _coco_ann(scene: SyntheticScene, o: Drawn, ann_id: int, image_id: int, size: int) -> dict:
    """One object's annotation: box, area and ``segmentation`` of its clipped outline (to 0.01 px), then the scene's keys."""
    ring = clipped_ring(o, size)
    x1, y1 = ring.min(0)
    x2, y2 = ring.max(0)
    x = ring[:, 0]
    y = ring[:, 1]
    area = 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))
    ann = {
        "id": ann_id,
        "image_id": image_id,
        "category_id": o.label + 1,
        "bbox": [round(float(x1), 2), round(float(y1), 2), round(float(x2 - x1), 2), round(float(y2 - y1), 2)],
        "area": round(area, 2),
        "iscrowd": 0,
        "segmentation": [[round(float(v), 2) for v in ring.reshape(-1)]],
    }
    ann.update(scene.coco_keys(o, ring))
    return ann


def _yolo_row(scene: SyntheticScene, o: Drawn, size: int) -> str:
    """One object's label row: its class id and the scene's numbers to 6 decimals."""
    return " ".join([str(o.label), *(f"{float(t):.6f}" for t in scene.yolo_row(o, size))])


def _categories(scene: SyntheticScene) -> list[dict]:
    return [{"id": i + 1, "name": n, "supercategory": "shape", **scene.category_keys} for i, n in enumerate(scene.names)]


def write_synthetic(
    out: Path | str,
    fields: tuple[str, ...],
    num_images: int,
    img_size: int = 320,
    seed: int = 0,
    fmt: str = "coco",
    val_fraction: float = 0.2,
    coco_layout: int = 2,
    image_format: str = "jpg",
) -> Path:
    """Write a synthetic shapes dataset and return its root.

    Args:
        out: target folder (created; must be empty or a previous synthetic
            set with identical parameters, which is then reused as is).
        fields: the task's instance fields; the first registered one with a
            ``synth`` rule picks the scene (none: :data:`SHAPES`), and they
            name the COCO annotation file as the reader looks for it.
        num_images: total images (train + val).
        img_size: square image side S in pixels.
        seed: generator seed; the same arguments give byte-identical files.
        fmt: ``coco`` (JSON container) or ``yolo`` (root with data.yaml).
        val_fraction: share of images in the val split (at least one each).
        coco_layout: 1 = ``train2017/`` + ``annotations/*_train2017.json``,
            2 = ``train/`` + ``annotations/*_train.json``.
        image_format: ``jpg`` or ``png``.

    Returns:
        The dataset root, usable as ``--data-root``.

    Raises:
        DataError: bad arguments, or ``out`` is a non-empty folder that is not
            the same synthetic set.
    """
    fields = tuple(fields)
    if fmt not in _FORMATS:
        raise DataError(f"Unknown synthetic format {fmt!r}.", fix="Use coco or yolo.")
    if num_images < 2:
        raise DataError(f"--images {num_images} is too few: a train and a val image are needed.", fix="Use at least 2.")
    if not 32 <= img_size <= 4096:
        raise DataError(f"--img-size {img_size} is outside 32..4096.")
    if coco_layout not in (1, 2):
        raise DataError(f"coco_layout {coco_layout} must be 1 or 2.")
    if image_format not in ("jpg", "png"):
        raise DataError(f"image_format {image_format!r} must be jpg or png.")
    out = Path(out)
    params = {
        "fields": list(fields), "num_images": num_images, "img_size": img_size, "seed": seed, "fmt": fmt,
        "val_fraction": val_fraction, "coco_layout": coco_layout, "image_format": image_format, "version": 1,
    }  # fmt: skip
    if _is_same_set(out, params):
        return out
    if out.exists() and any(out.iterdir()):
        raise DataError(
            f"{out} is not empty and is not the same synthetic set.",
            fix="Choose an empty or new --out folder (or delete this one).",
        )
    specs = _specs(fields)
    scene = scene_of(specs, SHAPES)
    n_val = min(num_images - 1, max(1, round(num_images * val_fraction)))
    splits = {"train": range(0, num_images - n_val), "val": range(num_images - n_val, num_images)}
    # Write into a sibling temp folder and rename: a crash never leaves a
    # half-written set that looks complete.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".synth-", dir=out.parent))
    try:
        for split, idx in splits.items():
            _write_split(tmp, split, idx, specs, scene, img_size, seed, fmt, coco_layout, image_format)
        if fmt == "yolo":
            _write_yaml(tmp, scene)
        (tmp / _MARKER).write_text(json.dumps(params, sort_keys=True))
        try:
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)
        except OSError:
            # another process (two runs started together on the default set) renamed the same set
            # into place first: keep theirs, drop ours
            if not _is_same_set(out, params):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _is_same_set(out: Path, params: dict) -> bool:
    """Whether ``out`` holds a finished synthetic set written with exactly ``params``."""
    marker = out / _MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()) == params
    except json.JSONDecodeError:
        return False


def _write_split(root: Path, split: str, idx: range, specs: tuple[FieldSpec, ...], scene: SyntheticScene, size: int, seed: int,
                 fmt: str, coco_layout: int, ext: str) -> None:
    if fmt == "coco":
        img_dir = root / (f"{split}2017" if coco_layout == 1 else split)
    else:
        img_dir = root / "images" / split
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
    img_dir.mkdir(parents=True, exist_ok=True)
    images, anns = [], []
    for i in idx:
        rng = np.random.default_rng([seed, i])
        pixels, objs = _paint(scene, size, rng)
        fname = f"{i:06d}.{ext}"
        im = Image.fromarray(pixels)
        if ext == "jpg":
            im.save(img_dir / fname, quality=92, optimize=False)
        else:
            im.save(img_dir / fname, compress_level=6)
        if fmt == "coco":
            images.append({"id": i + 1, "file_name": fname, "height": size, "width": size})
            for o in objs:
                anns.append(_coco_ann(scene, o, len(anns) + 1, i + 1, size))
        else:
            rows = [_yolo_row(scene, o, size) for o in objs]
            (root / "labels" / split / f"{i:06d}.txt").write_text("".join(r + "\n" for r in rows))
    if fmt == "coco":
        pre = ann_prefix(tuple(f.name for f in specs))
        suffix = f"{split}2017" if coco_layout == 1 else split
        (root / "annotations").mkdir(exist_ok=True)
        doc = {
            "info": {"description": f"lucid-yolo synthetic shapes ({', '.join(f.name for f in specs) or 'boxes'})"},
            "images": images,
            "annotations": anns,
            "categories": _categories(scene),
        }
        (root / "annotations" / f"{pre}_{suffix}.json").write_text(json.dumps(doc))


def _write_yaml(root: Path, scene: SyntheticScene) -> None:
    lines = ["# lucid-yolo synthetic shapes", "path: .", "train: images/train", "val: images/val", *scene.yaml_lines, "names:"]
    lines.extend(f"  {i}: {n}" for i, n in enumerate(scene.names))
    (root / "data.yaml").write_text("\n".join(lines) + "\n")
