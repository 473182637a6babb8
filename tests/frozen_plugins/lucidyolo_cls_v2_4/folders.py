"""The class-folder layout: ``root/{train,val}/<class_name>/*.jpg``.

Class names are the sub-folders of ``root/train`` in sorted order (the same
list for every split, so a label means the same class everywhere); a split
folder with a class the training split lacks is refused. Numpy and file
headers only: no image is decoded here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucidyolo.data.image_io import IMAGE_SUFFIXES, read_image_size
from lucidyolo.data.source import ImageSource, SourceBuilder
from lucidyolo.errors import DataError
from lucidyolo.structures.targets import Targets

from lucidyolo_cls_v2_4.fields import NAME

SPLIT_SYNONYMS = {"val": ("val", "valid", "validation")}
"""Names a validation folder goes by in published class-folder sets."""


def class_names(root: Path) -> list[str]:
    """Sorted sub-folder names of ``root/train`` (the label order)."""
    train = root / "train"
    if not train.is_dir():
        raise DataError(
            f"{root} has no train/ folder, so it is not a class-folder dataset.",
            why="classification reads root/train/<class_name>/*.jpg (and root/val/... for validation).",
            fix="Arrange the images as train/<class>/ and val/<class>/ under the root.",
        )
    names = sorted(p.name for p in train.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(names) < 2:
        raise DataError(
            f"{train} holds {len(names)} class folder(s); classification needs at least 2.",
            fix="Put each class's images in its own sub-folder of train/.",
        )
    return names


def split_folder(root: Path, split: str) -> Path:
    for name in SPLIT_SYNONYMS.get(split, (split,)):
        if (root / name).is_dir():
            return root / name
    raise DataError(
        f"Split {split!r} not found under {root}: no {' or '.join(SPLIT_SYNONYMS.get(split, (split,)))} folder.",
        fix=f"Create {root / split}/<class_name>/ folders, or validate on another split (--data.val_split train).",
    )


def read_class_folders(
    root: Path, split: str, fields: tuple[str, ...] = (NAME,), layout: str | None = None, **_: Any
) -> ImageSource:
    """The ``read_split`` hook: one split as an :class:`ImageSource` whose images carry ``image_class``."""
    root = Path(root)
    if layout is not None:
        raise DataError(f"--data.layout {layout} does not apply to classification.", fix="Drop --data.layout.")
    names = class_names(root)
    folder = split_folder(root, split)
    index = {n: i for i, n in enumerate(names)}
    extra = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in index)
    if extra:
        raise DataError(
            f"{folder} has class folder(s) {extra} that train/ does not have.",
            why="a label the model never trained on cannot be scored.",
            fix="Add the class to train/ or remove it from this split.",
        )
    builder = SourceBuilder(fields=tuple(fields))
    image_id = 0
    for name in names:
        sub = folder / name
        if not sub.is_dir():
            continue
        for path in sorted(p for p in sub.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES):
            h, w = read_image_size(path)
            targets = Targets.empty_for_fields(fields)
            targets.image_class = index[name]
            builder.add(str(path.relative_to(root)), image_id, (h, w), targets)
            image_id += 1
    if image_id == 0:
        raise DataError(f"{folder} holds no images in its class folders.", fix="Add images (jpg, png, ...).")
    return builder.build(
        root=root, class_names=names, category_ids=list(range(len(names))),
        name=f"{root} [{split}]", layout="class-folders",
    )
