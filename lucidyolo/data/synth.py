"""Synthetic shapes dataset: real image files + COCO JSON or a YOLO root, for every field a task reads.

Scenes are coloured geometric shapes on a noisy, textured background. The set
is deliberately learnable by a tiny model in minutes on a CPU: each class has
its own shape *and* hue, objects span 8-40 % of the image side and barely
overlap. Used by tests, the overfit gates and the default ``lucid fit`` run;
it goes through exactly the same readers as real data.

- det / seg: 4 classes: circle (red), square (green), triangle (blue),
  hexagon (yellow); polygons are the drawn outlines.
- obb: 4 classes of rotated rectangles (same hues, aspect ratios 1.3-3.5).
- pose: 1 class ``symbol``, a 7-keypoint stick figure (head, hands, hips,
  feet) with flip pairs ``(1, 2), (3, 4), (5, 6)``.

Every image is drawn from its own generator seeded by ``(seed, index)``, so
the output is byte-reproducible and image ``i`` does not depend on the count.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from lucidyolo.errors import DataError
from lucidyolo.structures.geometry import canonicalize_rboxes, rbox_to_corners

SHAPE_CLASSES = ["circle", "square", "triangle", "hexagon"]
OBB_CLASSES = ["red bar", "green bar", "blue bar", "yellow bar"]
POSE_CLASSES = ["symbol"]
KEYPOINT_NAMES = ["head", "left_hand", "right_hand", "left_hip", "right_hip", "left_foot", "right_foot"]
FLIP_IDX = [0, 2, 1, 4, 3, 6, 5]
# Keypoint layout of the symbol in units of its half-height, y down.
_SYMBOL = np.array([[0.0, -1.0], [-0.8, -0.3], [0.8, -0.3], [-0.35, 0.25], [0.35, 0.25], [-0.5, 1.0], [0.5, 1.0]])
_SKELETON = [(0, 7), (1, 7), (2, 7), (3, 7), (4, 7), (3, 5), (4, 6)]  # 7 = body centre
_HUES = np.array([[220, 40, 40], [40, 190, 60], [40, 80, 230], [235, 210, 40]], np.float64)
_OBB_ASPECT = [3.5, 2.2, 1.3, 2.8]
_FORMATS = ("coco", "yolo")
_MARKER = ".lucid_synth.json"


@dataclass
class _Obj:
    label: int
    ring: np.ndarray  # (n, 2) outline in pixels (float)
    rbox: np.ndarray | None = None  # (5,) canonical (obb)
    kpts: np.ndarray | None = None  # (7, 2) (pose)


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


def _shape_ring(label: int, cx: float, cy: float, r: float, rot: float) -> np.ndarray:
    if label == 0:
        return _regular(32, cx, cy, r, 0.0)
    if label == 1:
        return _regular(4, cx, cy, r, rot + np.pi / 4)
    if label == 2:
        return _regular(3, cx, cy, r, rot - np.pi / 2)
    return _regular(6, cx, cy, r, rot)


def _place(rng: np.random.Generator, size: int, placed: list[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """Centre and radius of a new object that barely overlaps the placed ones."""
    for _ in range(40):
        side = rng.uniform(0.08, 0.40) * size
        r = side / 2
        cx, cy = rng.uniform(r, size - r, size=2)
        if all(np.hypot(cx - x, cy - y) > 0.9 * (r + q) for x, y, q in placed):
            return float(cx), float(cy), float(r)
    return None


def _scene(fields: tuple[str, ...], size: int, rng: np.random.Generator) -> tuple[np.ndarray, list[_Obj]]:
    img = Image.fromarray(_background(rng, size))
    draw = ImageDraw.Draw(img)
    objs: list[_Obj] = []
    placed: list[tuple[float, float, float]] = []
    for _ in range(int(rng.integers(1, 6))):
        spot = _place(rng, size, placed)
        if spot is None:
            break
        cx, cy, r = spot
        placed.append(spot)
        label = int(rng.integers(0, 1 if "keypoints" in fields else 4))
        colour = tuple(int(v) for v in np.clip(_HUES[label] + rng.normal(0, 12, 3), 0, 255))
        rot = float(rng.uniform(0, 2 * np.pi))
        if "rboxes" in fields:
            aspect = _OBB_ASPECT[label]
            w = 2 * r
            h = w / aspect
            rb = canonicalize_rboxes(np.array([[cx, cy, w, h, rot]]))[0]
            ring = rbox_to_corners(rb[None])[0].astype(np.float64)
            draw.polygon([tuple(p) for p in ring], fill=colour)
            objs.append(_Obj(label, ring, rbox=rb))
        elif "keypoints" in fields:
            tilt = float(rng.uniform(-0.35, 0.35))
            c, s = np.cos(tilt), np.sin(tilt)
            local = np.vstack([_SYMBOL, [[0.0, -0.3]]]) * r  # 8th point: body centre (not a keypoint)
            pts = np.stack([cx + c * local[:, 0] - s * local[:, 1], cy + s * local[:, 0] + c * local[:, 1]], 1)
            width = max(2, int(r * 0.12))
            for a, b in _SKELETON:
                draw.line([tuple(pts[a]), tuple(pts[b])], fill=colour, width=width)
            dot = max(2.0, r * 0.1)
            for k, p in enumerate(pts[:7]):
                # Head white, limbs tinted: keypoints are locatable, left/right symmetric.
                fill = (245, 245, 245) if k == 0 else (30, 30, 30)
                draw.ellipse([p[0] - dot, p[1] - dot, p[0] + dot, p[1] + dot], fill=fill)
            kp = pts[:7]
            lo, hi = kp.min(0) - dot, kp.max(0) + dot
            ring = np.array([[lo[0], lo[1]], [hi[0], lo[1]], [hi[0], hi[1]], [lo[0], hi[1]]])
            objs.append(_Obj(label, np.clip(ring, 0, size), kpts=kp))
        else:
            ring = _shape_ring(label, cx, cy, r, rot)
            draw.polygon([tuple(p) for p in ring], fill=colour)
            objs.append(_Obj(label, ring))
    return np.asarray(img), objs


def _clip_ring(ring: np.ndarray, size: int) -> np.ndarray:
    return np.clip(ring, 0, size)


def _coco_ann(o: _Obj, ann_id: int, image_id: int, size: int) -> dict:
    ring = _clip_ring(o.ring, size)
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
    if o.kpts is not None:
        kp = np.concatenate([o.kpts, np.full((len(o.kpts), 1), 2.0)], 1)
        ann["keypoints"] = [round(float(v), 2) for v in kp.reshape(-1)]
        ann["num_keypoints"] = len(o.kpts)
        ann["area"] = round(float((x2 - x1) * (y2 - y1)), 2)
    if o.rbox is not None:
        ann["difficult"] = 0
    return ann


def _yolo_row(o: _Obj, fields: tuple[str, ...], size: int) -> str:
    def f(v: np.ndarray) -> str:
        return " ".join(f"{float(t):.6f}" for t in np.asarray(v).reshape(-1))

    ring = _clip_ring(o.ring, size) / size
    if "polygons" in fields:
        return f"{o.label} {f(ring)}"
    if "rboxes" in fields:
        return f"{o.label} {f(ring)}"
    lo, hi = ring.min(0), ring.max(0)
    box = np.concatenate([(lo + hi) / 2, hi - lo])
    if "keypoints" in fields:
        assert o.kpts is not None
        kp = np.concatenate([o.kpts / size, np.full((len(o.kpts), 1), 2.0)], 1)
        return f"{o.label} {f(box)} {f(kp)}"
    return f"{o.label} {f(box)}"


def _class_names(fields: tuple[str, ...]) -> list[str]:
    if "rboxes" in fields:
        return list(OBB_CLASSES)
    return list(POSE_CLASSES) if "keypoints" in fields else list(SHAPE_CLASSES)


def _categories(fields: tuple[str, ...]) -> list[dict]:
    cats = [{"id": i + 1, "name": n, "supercategory": "shape"} for i, n in enumerate(_class_names(fields))]
    if "keypoints" in fields:
        cats[0]["keypoints"] = list(KEYPOINT_NAMES)
        cats[0]["skeleton"] = [[a + 1, b + 1] for a, b in ((0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6))]
    return cats


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
        fields: the task's instance fields; they pick the scene kind
            (``rboxes``: elongated rotated shapes, ``keypoints``: 7-point symbols,
            ``polygons``: polygon labels, none: boxes) and the label format.
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
    n_val = min(num_images - 1, max(1, round(num_images * val_fraction)))
    splits = {"train": range(0, num_images - n_val), "val": range(num_images - n_val, num_images)}
    # Write into a sibling temp folder and rename: a crash never leaves a
    # half-written set that looks complete.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".synth-", dir=out.parent))
    try:
        for split, idx in splits.items():
            _write_split(tmp, split, idx, fields, img_size, seed, fmt, coco_layout, image_format)
        if fmt == "yolo":
            _write_yaml(tmp, fields)
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


def _write_split(root: Path, split: str, idx: range, fields: tuple[str, ...], size: int, seed: int, fmt: str, coco_layout: int, ext: str) -> None:
    if fmt == "coco":
        img_dir = root / (f"{split}2017" if coco_layout == 1 else split)
    else:
        img_dir = root / "images" / split
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
    img_dir.mkdir(parents=True, exist_ok=True)
    images, anns = [], []
    for i in idx:
        rng = np.random.default_rng([seed, i])
        pixels, objs = _scene(fields, size, rng)
        fname = f"{i:06d}.{ext}"
        im = Image.fromarray(pixels)
        if ext == "jpg":
            im.save(img_dir / fname, quality=92, optimize=False)
        else:
            im.save(img_dir / fname, compress_level=6)
        if fmt == "coco":
            images.append({"id": i + 1, "file_name": fname, "height": size, "width": size})
            for o in objs:
                anns.append(_coco_ann(o, len(anns) + 1, i + 1, size))
        else:
            rows = [_yolo_row(o, fields, size) for o in objs]
            (root / "labels" / split / f"{i:06d}.txt").write_text("".join(r + "\n" for r in rows))
    if fmt == "coco":
        pre = "person_keypoints" if "keypoints" in fields else "instances"
        suffix = f"{split}2017" if coco_layout == 1 else split
        (root / "annotations").mkdir(exist_ok=True)
        doc = {
            "info": {"description": f"lucid-yolo synthetic shapes ({', '.join(fields) or 'boxes'})"},
            "images": images,
            "annotations": anns,
            "categories": _categories(fields),
        }
        (root / "annotations" / f"{pre}_{suffix}.json").write_text(json.dumps(doc))


def _write_yaml(root: Path, fields: tuple[str, ...]) -> None:
    lines = ["# lucid-yolo synthetic shapes", "path: .", "train: images/train", "val: images/val"]
    if "keypoints" in fields:
        lines.append(f"kpt_shape: [{len(KEYPOINT_NAMES)}, 3]")
        lines.append(f"flip_idx: {FLIP_IDX}")
    lines.append("names:")
    lines.extend(f"  {i}: {n}" for i, n in enumerate(_class_names(fields)))
    (root / "data.yaml").write_text("\n".join(lines) + "\n")
