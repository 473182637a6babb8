"""DOTA-v1.0 ``labelTxt`` reader: ``{split}/images/*`` + ``{split}/labelTxt/*.txt``.

Each label file may start with ``imagesource:`` and ``gsd:`` header lines,
then one object per row: ``x1 y1 x2 y2 x3 y3 x4 y4 class difficult`` in
pixels. Class names are the 15 DOTA-v1.0 classes in their official order; a
class outside that list (for example DOTA-v1.5's ``container-crane``) fails
loudly naming ``file:line``. The corner ring is kept as the polygon (seg), fit
to a canonical rotated box (obb) or to its enclosing box (det). Corners past
the image edge are clipped.

The source :func:`read_dota` returns carries one fit-time check
(:attr:`~lucidyolo.data.source.ImageSource.fit_checks`),
:func:`refuse_untiled_scenes`: ``lucid fit`` trains on tiles, never on whole
scenes larger than the training size.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from lucidyolo.data.image_io import IMAGE_SUFFIXES, read_image_size
from lucidyolo.data.source import ImageSource, SourceBuilder
from lucidyolo.errors import DataError
from lucidyolo.structures.fields import field_specs
from lucidyolo.structures.geometry import corners_to_xyxy
from lucidyolo.structures.targets import Targets

DOTA_V1_CLASSES = [
    "plane",
    "ship",
    "storage tank",
    "baseball diamond",
    "tennis court",
    "basketball court",
    "ground track field",
    "harbor",
    "bridge",
    "large vehicle",
    "small vehicle",
    "helicopter",
    "roundabout",
    "soccer ball field",
    "swimming pool",
]
_LABEL_OF = {n: i for i, n in enumerate(DOTA_V1_CLASSES)}
_HEADERS = ("imagesource:", "gsd:")


def dota_class_label(name: str) -> int | None:
    """Contiguous label of a DOTA class name (``storage-tank`` or ``storage tank``), else ``None``."""
    return _LABEL_OF.get(name.strip().lower().replace("-", " ").replace("_", " "))


def parse_dota_label_file(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse one labelTxt file.

    Returns:
        ``corners (N, 4, 2)`` float32 pixels, ``labels (N,)`` int64,
        ``difficult (N,)`` bool.

    Raises:
        DataError: a malformed row or unknown class, naming ``file:line``.
    """
    corners: list[list[float]] = []
    labels: list[int] = []
    difficult: list[bool] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: label file is not UTF-8 text.") from None
    for ln, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.lower().startswith(_HEADERS):
            continue
        toks = s.split()
        where = f"{path}:{ln}"
        if len(toks) not in (9, 10):
            raise DataError(
                f"{where}: row has {len(toks)} fields; DOTA rows are `x1 y1 x2 y2 x3 y3 x4 y4 class difficult`.",
                fix="Fix or remove the row.",
            )
        try:
            xy = [float(t) for t in toks[:8]]
        except ValueError:
            raise DataError(f"{where}: corner coordinates must be numbers, got {toks[:8]}.") from None
        if not all(math.isfinite(v) for v in xy):
            raise DataError(f"{where}: corner coordinates contain NaN or infinity.")
        label = dota_class_label(toks[8])
        if label is None:
            raise DataError(
                f"{where}: class {toks[8]!r} is not one of the 15 DOTA-v1.0 classes.",
                why="the obb presets are built for DOTA-v1.0 (DOTA-v1.5/2.0 add classes such as container-crane).",
                fix="Remove rows of other classes or convert the dataset to DOTA-v1.0 classes.",
            )
        diff = toks[9] if len(toks) == 10 else "0"
        if diff not in ("0", "1"):
            raise DataError(f"{where}: difficult flag {diff!r} must be 0 or 1.")
        corners.append(xy)
        labels.append(label)
        difficult.append(diff == "1")
    return (
        np.asarray(corners, np.float32).reshape(-1, 4, 2),
        np.asarray(labels, np.int64),
        np.asarray(difficult, bool),
    )


def dota_targets(corners: np.ndarray, labels: np.ndarray, difficult: np.ndarray, fields: tuple[str, ...], h: int, w: int) -> Targets:
    """Targets of one scene from its corner rings (clipped to the image)."""
    c = np.clip(corners, 0, np.array([w, h], np.float32))
    boxes = corners_to_xyxy(c)
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    extra: dict[str, object] = {}
    for f in field_specs(fields):
        if f.dota is not None:
            extra.update(f.dota(c))
    t = Targets(boxes=boxes, labels=labels, difficult=difficult, **extra)
    return t if keep.all() else t.filter(keep)


def read_dota(split_dir: Path, fields: tuple[str, ...], *, name: str = "") -> ImageSource:
    """Read a DOTA split folder holding ``images/`` and ``labelTxt/``.

    Args:
        split_dir: e.g. ``/data/dota/train``.
        fields: the task's instance fields, each read from the corners by its
            ``FieldSpec.dota`` rule (``polygons``, ``rboxes``); a field without
            one is refused.
        name: description for messages.

    Raises:
        DataError: a field DOTA cannot fill (keypoints), no images, a label without its image, a bad
            row or class (``file:line``).
    """
    unread = [f.name for f in field_specs(fields) if f.dota is None and not all(a.fill_missing for a in f.attrs)]
    if unread:
        raise DataError(f"DOTA rows hold four corners, so the task's field {unread[0]!r} cannot be read from {split_dir}.",
                        fix="Use --task obb (or det/seg), or a dataset layout that has the field.")
    img_dir, lab_dir = split_dir / "images", split_dir / "labelTxt"
    images = sorted(p for p in img_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not images:
        raise DataError(f"{img_dir} contains no images.", fix="Put the scene images (PNG) there.")
    by_stem = {p.stem: p for p in images}
    for lab in sorted(lab_dir.glob("*.txt")):
        if lab.stem not in by_stem:
            raise DataError(
                f"{lab}: label file has no image {img_dir / lab.stem}.*",
                why="a label for a missing image cannot be trained on.",
                fix="Restore the image or delete the label file.",
            )
    builder = SourceBuilder(fields)
    for i, img in enumerate(images):
        h, w = read_image_size(img)
        lab = lab_dir / f"{img.stem}.txt"
        # No label file = background scene.
        t = dota_targets(*parse_dota_label_file(lab), fields, h, w) if lab.is_file() else None
        builder.add(img.name, i, (h, w), t)
    src = builder.build(
        root=img_dir.resolve(),
        class_names=list(DOTA_V1_CLASSES),
        category_ids=list(range(len(DOTA_V1_CLASSES))),
        name=name or str(split_dir),
        layout="dota",
    )
    src.fit_checks = (refuse_untiled_scenes,)
    return src


def refuse_untiled_scenes(source: ImageSource, img_size: int) -> None:
    """Refuse to train on whole DOTA scenes: a ``labelTxt`` split whose images are larger than the training size.

    Letterboxing a 4000 px scene to 1024 px shrinks a 12 px vehicle to 3 px, so
    the run would train on objects the tiles show at their real size. This is
    the fit check :func:`read_dota` attaches to its source.

    Args:
        source: a split read by :func:`read_dota`.
        img_size: the training size in pixels.

    Raises:
        DataError: naming the largest scene and ``lucid data tile dota``.
    """
    if len(source) == 0:
        return
    hw = source.all_hw()
    sides = hw.max(axis=1)
    worst = int(sides.argmax())
    if int(sides[worst]) <= img_size:
        return
    h, w = (int(v) for v in hw[worst])
    big = int((sides > img_size).sum())
    raise DataError(
        f"{big} of {len(source)} images in {source.name or source.root} are larger than the training size "
        f"{img_size} px (the largest, {source.image_path(worst).name}, is {w} x {h}): these are whole DOTA scenes.",
        why="training reads tiles, never whole scenes: letterboxing a scene shrinks its small objects to a few pixels.",
        fix=f"Cut them into tiles first: `lucid data tile dota --data-root <DOTA root> --out <tiles> --patch {img_size}`, "
            "then train on `--data-root <tiles>`.",
    )
