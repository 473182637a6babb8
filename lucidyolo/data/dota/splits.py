"""The tiler's input: a DOTA root resolved to its splits, their scenes and label files.

A DOTA root holds ``{split}/images`` + ``{split}/labelTxt``, or a flat
``images`` + ``labelTxt`` written as one split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lucidyolo.data.image_io import IMAGE_SUFFIXES
from lucidyolo.errors import DataError


@dataclass
class SplitInput:
    """One split of the input root: its scenes (sorted by file name) and their label files."""

    split: str
    images_dir: Path
    labels_dir: Path
    images: list[Path]
    labels: list[Path | None]


def find_splits(root: Path, splits: Sequence[str]) -> list[SplitInput]:
    """Resolve the input root to its scenes, per split.

    ``root/{split}/images`` + ``root/{split}/labelTxt`` per split, or a flat
    ``root/images`` + ``root/labelTxt`` when exactly one split is asked for.

    Raises:
        DataError: the root or a split folder is missing, a flat root with
            several splits, a label file without its image, two scenes with
            one stem, a folder without images.
    """
    if not splits:
        raise DataError("No split given.", fix="Pass e.g. --splits train,val (or --splits train for a flat root).")
    if len(set(splits)) != len(splits):
        raise DataError(f"--splits {','.join(splits)} names a split twice.", fix="Name each split once.")
    for s in splits:
        if not s or s.startswith(".") or "/" in s or "\\" in s or s == "annotations":
            raise DataError(f"Split name {s!r} cannot be used as a folder name.", fix="Use names such as train, val.")
    if not root.is_dir():
        raise DataError(f"DOTA root {root} does not exist or is not a folder.", fix="Check the --data-root path.")
    flat = (root / "images").is_dir() and (root / "labelTxt").is_dir()
    nested = any((root / s / "images").is_dir() for s in splits)
    if flat and not nested:
        if len(splits) != 1:
            raise DataError(
                f"{root} is a flat DOTA folder (images/ + labelTxt/, no split folders), but --splits names {len(splits)} splits ({', '.join(splits)}).",
                why="a flat folder holds one set of scenes; it cannot be divided into several splits.",
                fix=f"Pass one split, e.g. --splits {splits[0]}; tile another flat folder into the same --out with the other split name.",
            )
        dirs = [(splits[0], root / "images", root / "labelTxt")]
    else:
        dirs = []
        for s in splits:
            img_dir, lab_dir = root / s / "images", root / s / "labelTxt"
            if not img_dir.is_dir() or not lab_dir.is_dir():
                missing = img_dir if not img_dir.is_dir() else lab_dir
                raise DataError(
                    f"Split {s!r}: {missing} is missing.",
                    why=f"looked for {root / s / 'images'}/ + {root / s / 'labelTxt'}/ (or a flat {root / 'images'}/ + {root / 'labelTxt'}/ with one split).",
                    fix="Check --data-root and --splits; an unlabelled split needs an empty labelTxt/ folder.",
                )
            dirs.append((s, img_dir, lab_dir))
    out = []
    for s, img_dir, lab_dir in dirs:
        images = sorted((p for p in img_dir.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES), key=lambda p: p.name)
        if not images:
            raise DataError(f"{img_dir} contains no images.", fix=f"Put the scene images there ({', '.join(IMAGE_SUFFIXES)}).")
        by_stem: dict[str, Path] = {}
        for p in images:
            if p.stem in by_stem:
                raise DataError(
                    f"{img_dir} holds two scenes named {p.stem!r}: {by_stem[p.stem].name} and {p.name}.",
                    why="tiles are named after the scene stem, and the label file is matched by it.",
                    fix="Remove or rename one of them.",
                )
            by_stem[p.stem] = p
        for lab in sorted(lab_dir.glob("*.txt")):
            if lab.stem not in by_stem:
                raise DataError(
                    f"{lab}: label file has no image {img_dir / lab.stem}.*",
                    why="a label for a missing scene cannot be tiled.",
                    fix="Restore the image or delete the label file.",
                )
        labels = [lab_dir / f"{p.stem}.txt" for p in images]
        out.append(SplitInput(s, img_dir, lab_dir, images, [lab if lab.is_file() else None for lab in labels]))
    return out
