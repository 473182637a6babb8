"""Does a training split carry labels? Catches a root whose labels were never found.

A YOLO root copied without its ``labels/`` folder reads as a split of
background images: every reader treats a missing label file as "nothing
here", which is right for one image and wrong for all of them. A detector
trained on such a split learns to find nothing, and says so only in its
metrics hours later. ``lucid fit`` calls :func:`check_label_coverage` on its
training split and ``lucid data check`` reports the same.

Numpy only, like the readers (no torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lucidyolo.errors import DataError

if TYPE_CHECKING:
    from lucidyolo.data.source import ImageSource

#: Above this share of images without labels, the split warns.
MOSTLY_UNLABELLED = 0.5


def labels_location(src: ImageSource) -> Path | str:
    """Where the split's labels were looked for: the YOLO ``labels/`` folder, DOTA's
    ``labelTxt/``, the annotation file, else the split's name."""
    if src.labels_from is not None:
        return src.labels_from
    if src.ann_file is not None:
        return src.ann_file
    if src.layout == "dota":
        return src.root.parent / "labelTxt"  # the DOTA reader's root is the split's images/ folder
    return src.name


def check_label_coverage(src: ImageSource, split: str) -> str | None:
    """Refuse a split without a single labelled instance; warn when most images have none.

    Splits whose images carry their own class target (classification:
    ``src.image_class_counts()`` is not ``None``) are exempt.

    Args:
        src: the split as read.
        split: its name, for the messages (``train``).

    Returns:
        A warning when more than half of the images have no label file (YOLO)
        or no labelled instance (other layouts), else ``None``.

    Raises:
        DataError: no image of the split has a labelled instance; names the
            folder or file the labels were looked for in.
    """
    if src.image_class_counts() is not None:
        return None
    if len(src) and src.num_instances == 0:
        where = labels_location(src)
        n = len(src)
        if src.images_without_label_file == n:
            what = f"None of the {n} {split} images has a label file: they were looked for under {where}."
            fix = (
                f"Put one .txt label file per image under {where} (an image's path with its last `images` folder "
                "replaced by `labels` and the suffix by .txt), e.g. copy the dataset's labels/ folder beside images/."
            )
        else:
            what = f"The {split} split has no labelled instance: none of its {n} images has a label in {where}."
            fix = f"Check that {where} holds this split's labels (and that they name these images), or point --data-root at the dataset that does."
        raise DataError(
            what,
            why="a detector trained only on background images learns to find nothing.",
            fix=fix,
        )
    return label_coverage_warning(src, split)


def label_coverage_warning(src: ImageSource, split: str) -> str | None:
    """The "most images are unlabelled" warning of :func:`check_label_coverage`, without the error.

    For a YOLO split the count is of images without a label file (an empty
    file says "background" on purpose and is not counted); for other layouts
    of images without a labelled instance.
    """
    n = len(src)
    if n == 0 or src.image_class_counts() is not None:
        return None
    where = labels_location(src)
    if src.images_without_label_file is not None:
        missing = src.images_without_label_file
        if missing > MOSTLY_UNLABELLED * n:
            return f"{missing} of {n} {split} images have no label file under {where}; {_as_background(split)}."
        return None
    missing = int((src.instances_per_image() == 0).sum())
    if missing > MOSTLY_UNLABELLED * n:
        return f"{missing} of {n} {split} images have no labelled instance in {where}; {_as_background(split)}."
    return None


def _as_background(split: str) -> str:
    return "they train as background" if split == "train" else "they count as background images"
