"""Which files make up a split: resolve a ``--data-root`` to a reader.

Conventions, probed in this order for the COCO container (the image folder
and the annotation file must both exist):

1. ``coco-2017``:   ``{split}2017/`` + ``annotations/{prefix}_{split}2017.json``
2. ``coco-split``:  ``{split}/`` + ``annotations/{prefix}_{split}.json`` (DOTA tiler output)
3. ``coco-images``: ``images/{split}/`` + ``annotations/{prefix}_{split}.json``
4. ``coco-export``: ``{split}/_annotations.coco.json`` beside the images
   (split ``val`` also finds ``valid/``, the folder name of Roboflow exports)

``prefix`` is ``instances`` (det/seg/obb) or ``person_keypoints`` (pose).
Then ``yolo`` (a ``data.yaml`` or ``*.yaml`` at the root, or the root is the
yaml file) and ``dota`` (``{split}/images`` + ``{split}/labelTxt``). A root
matching more than one of COCO / YOLO / DOTA is refused unless ``layout``
names one; a root matching none gets the list of what was looked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lucidyolo.data.layout_names import COCO_LAYOUTS, LAYOUTS
from lucidyolo.data.source import ImageSource
from lucidyolo.errors import DataError

EXPLICIT_PARTS = ("images", "ann_file")
"""An explicit split is ``{split}_images`` (a folder) with ``{split}_ann_file`` (its COCO JSON)."""


@dataclass
class Resolved:
    """A resolved split: which reader and which files."""

    layout: str
    images: Path | None = None
    ann_file: Path | None = None
    yaml: Path | None = None
    split_dir: Path | None = None
    looked_for: list[str] = field(default_factory=list)


def ann_prefix(fields: tuple[str, ...]) -> str:
    """Annotation file prefix: the first field rule's that names one (keypoints: ``person_keypoints``), else ``instances``."""
    from lucidyolo.structures.fields import field_specs

    return next((f.coco.ann_prefix for f in field_specs(fields) if f.coco and f.coco.ann_prefix), "instances")


def coco_candidates(root: Path, split: str, fields: tuple[str, ...]) -> list[tuple[str, Path, Path]]:
    """``(layout, images_dir, ann_file)`` of the four COCO conventions, in probe order."""
    pre = ann_prefix(fields)
    out = [
        ("coco-2017", root / f"{split}2017", root / "annotations" / f"{pre}_{split}2017.json"),
        ("coco-split", root / split, root / "annotations" / f"{pre}_{split}.json"),
        ("coco-images", root / "images" / split, root / "annotations" / f"{pre}_{split}.json"),
        ("coco-export", root / split, root / split / "_annotations.coco.json"),
    ]
    if split == "val":
        # Roboflow's COCO export calls its validation folder `valid/`.
        out.append(("coco-export", root / "valid", root / "valid" / "_annotations.coco.json"))
    return out


def _rel(p: Path, root: Path) -> str:
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return str(p)


def detect_families(root: Path, split: str, fields: tuple[str, ...]) -> dict[str, Resolved]:
    """Every convention family (``coco``, ``yolo``, ``dota``) the root matches for a split."""
    from lucidyolo.data.yolo import find_yolo_yaml

    found: dict[str, Resolved] = {}
    if root.is_dir():
        for name, img, ann in coco_candidates(root, split, fields):
            if img.is_dir() and ann.is_file():
                found["coco"] = Resolved(name, images=img, ann_file=ann)
                break
        sd = root / split
        if (sd / "images").is_dir() and (sd / "labelTxt").is_dir():
            found["dota"] = Resolved("dota", split_dir=sd)
        elif split == "train" and (root / "images").is_dir() and (root / "labelTxt").is_dir():
            # A bare DOTA folder (the devkit examples, one unsplit download) is
            # its train split only, so it can never leak into validation.
            found["dota"] = Resolved("dota", split_dir=root)
    yamls = find_yolo_yaml(root)
    if yamls:
        if len(yamls) > 1:
            raise DataError(
                f"{root} holds several dataset yaml files: {', '.join(p.name for p in yamls)}.",
                why="it is not clear which one describes the dataset.",
                fix="Rename the right one to data.yaml, or pass the yaml file itself as --data-root.",
            )
        found["yolo"] = Resolved("yolo", yaml=yamls[0])
    return found


def looked_for(root: Path, split: str, fields: tuple[str, ...]) -> list[str]:
    """Human-readable list of every path pattern probed for a split."""
    out = [f"{_rel(i, root)}/ + {_rel(a, root)}" for _, i, a in coco_candidates(root, split, fields)]
    out.append("data.yaml or *.yaml (YOLO root)")
    out.append(f"{split}/images/ + {split}/labelTxt/ (DOTA)" + (" or images/ + labelTxt/" if split == "train" else ""))
    return out


def resolve(root: Path, split: str, fields: tuple[str, ...], layout: str | None = None) -> Resolved:
    """Pick the convention of ``root`` for ``split``.

    Raises:
        DataError: the root does not exist, matches several families (and
            ``layout`` is not given) or none (lists what was looked for).
    """
    if layout is not None and layout not in LAYOUTS:
        raise DataError(f"Unknown layout {layout!r}.", fix=f"Use one of {', '.join(LAYOUTS)}.")
    if not root.exists():
        raise DataError(f"Dataset root {root} does not exist.", fix="Check the --data-root path.")
    if layout in COCO_LAYOUTS:
        named = [(img, ann) for name, img, ann in coco_candidates(root, split, fields) if name == layout]
        for img, ann in named:
            if img.is_dir() and ann.is_file():
                return Resolved(layout, images=img, ann_file=ann)
        img, ann = named[0]
        raise DataError(
            f"Layout {layout} needs {_rel(img, root)}/ and {_rel(ann, root)} under {root}; "
            f"{'the folder' if not img.is_dir() else 'the annotation file'} is missing.",
            fix="Pick the layout that matches the files, or omit --data.layout to detect it.",
        )
    families = detect_families(root, split, fields)
    if layout is not None:
        fam = "coco" if layout in ("coco", *COCO_LAYOUTS) else layout
        if fam not in families:
            raise DataError(
                f"{root} does not look like a {layout} dataset for split {split!r}.",
                why="looked for: " + "; ".join(looked_for(root, split, fields)),
                fix="Pick the layout that matches the files, or omit the layout to detect it.",
            )
        return families[fam]
    if len(families) > 1:
        raise DataError(
            f"{root} matches several dataset conventions for split {split!r}: {', '.join(sorted(families))}.",
            why="reading the wrong one would silently train on different labels.",
            fix=f"Name one with --data.layout ({' or '.join(sorted(families))}).",
        )
    if not families:
        raise DataError(
            f"{root} matches no dataset convention for split {split!r}.",
            why="looked for: " + "; ".join(looked_for(root, split, fields)),
            fix="Arrange the files in one of these layouts or pass explicit train_images/train_ann_file paths.",
        )
    return next(iter(families.values()))


def read_split(
    data_root: Path | None,
    split: str,
    fields: tuple[str, ...],
    *,
    layout: str | None = None,
    explicit_paths: dict[str, Path | str] | None = None,
) -> ImageSource:
    """Resolve and read one split (see :func:`lucidyolo.data.source.open_source`)."""
    explicit = dict(explicit_paths or {})
    unknown = [k for k in explicit if not any(k.endswith(f"_{part}") for part in EXPLICIT_PARTS)]
    if unknown:
        raise DataError(
            f"Unknown explicit path keys {sorted(unknown)}.",
            fix=f"Name them {{split}}_{' and {split}_'.join(EXPLICIT_PARTS)}, e.g. train_images and train_ann_file.",
        )
    img_key, ann_key = f"{split}_images", f"{split}_ann_file"
    if img_key in explicit or ann_key in explicit:
        if img_key not in explicit or ann_key not in explicit:
            missing = ann_key if img_key in explicit else img_key
            raise DataError(f"{img_key} and {ann_key} must be given together; {missing} is missing.")
        img, ann = Path(explicit[img_key]), Path(explicit[ann_key])
        if not img.is_dir():
            raise DataError(f"{img_key} {img} is not a folder.")
        from lucidyolo.data.coco import read_coco

        return read_coco(img, ann, fields, name=f"{ann} [{split}]", layout="coco-explicit")
    if data_root is None:
        raise DataError(
            f"No dataset for split {split!r}: neither a data root nor {img_key}/{ann_key} was given.",
            fix="Pass --data-root, or omit it to use the built-in synthetic set.",
        )
    r = resolve(data_root, split, fields, layout)
    name = f"{data_root} [{split}]"
    if r.layout == "yolo":
        from lucidyolo.data.yolo import read_yolo

        assert r.yaml is not None
        return read_yolo(r.yaml, split, fields, name=name)
    if r.layout == "dota":
        from lucidyolo.data.dota.reader import read_dota

        assert r.split_dir is not None
        return read_dota(r.split_dir, fields, name=name)
    from lucidyolo.data.coco import read_coco

    assert r.images is not None and r.ann_file is not None
    return read_coco(r.images, r.ann_file, fields, name=name, layout=r.layout)


def check_same_categories(train: ImageSource, val: ImageSource) -> None:
    """Refuse train/val splits that declare different categories.

    Raises:
        DataError: names or category ids differ (labels would mean different
            classes in training and evaluation).
    """
    if train.category_ids != val.category_ids or train.class_names != val.class_names:
        a = list(zip(train.category_ids, train.class_names, strict=True))
        b = list(zip(val.category_ids, val.class_names, strict=True))
        diff = sorted(set(a) ^ set(b))[:5]
        raise DataError(
            f"The train split ({train.name}) and val split ({val.name}) declare different categories "
            f"({len(a)} vs {len(b)}; first differences: {diff}).",
            why="a contiguous label would mean one class in training and another in evaluation.",
            fix="Use annotation files with the same 'categories' list (or the same yaml names).",
        )


def open_source(
    data_root: Path | str | None,
    split: str,
    fields: tuple[str, ...] = (),
    layout: str | None = None,
    **explicit_paths: Path | str | None,
) -> ImageSource:
    """Resolve a dataset root (or explicit paths) and read one split.

    Args:
        data_root: dataset root (COCO container, YOLO root or DOTA root);
            ``None`` when explicit paths are given.
        split: ``"train"`` or ``"val"`` (any name the layout has).
        fields: the task's instance fields (``TaskSpec.fields``); they pick
            the label format and the annotation file convention.
        layout: force a layout (``coco``, ``coco-2017``, ``coco-split``,
            ``coco-images``, ``coco-export``, ``yolo``, ``dota``) when a root
            matches several; ``None`` = detect.
        **explicit_paths: ``train_images``, ``train_ann_file``, ``val_images``,
            ``val_ann_file`` overrides (COCO JSON + image folder).

    Returns:
        The split as an :class:`ImageSource`.

    Raises:
        DataError: the root matches no layout, several layouts, or its files
            are malformed (message names ``file:line``).
    """
    return read_split(
        None if data_root is None else Path(data_root),
        split,
        tuple(fields),
        layout=layout,
        explicit_paths={k: v for k, v in explicit_paths.items() if v is not None},
    )
