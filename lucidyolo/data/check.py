"""``lucid data check``: read every split the way training will and report.

For each split: the resolved layout, image / instance / class counts,
background images, instances per class, the first bad ``file:line`` of the
labels (reader errors, label files without an image), label files that repeat
rows, every unusable image
file, images whose EXIF orientation lucid ignores, and a training split
without labels. Also the class count that ``model.num_classes: auto`` (the default) resolves to:
nothing to set. No torch.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lucidyolo.data.core_shares import map_shares
from lucidyolo.data.image_io import (
    BadImagesError,
    image_error_reason,
    read_image,
    read_image_header,
    refuse_unscalable_mode,
)
from lucidyolo.data.label_coverage import check_label_coverage, label_coverage_warning
from lucidyolo.data.label_duplicates import duplicate_rows_warning
from lucidyolo.errors import DataError

_JPEG_EOI = b"\xff\xd9"
_PNG_IEND = b"IEND"
_TAIL_BYTES = 4096
#: Example paths a warning about many files names.
_EXAMPLES = 3


@dataclass
class SplitReport:
    """What ``check`` found for one split."""

    split: str
    found: bool
    layout: str = ""
    layout_description: str = ""
    paths: list[str] = field(default_factory=list)
    images: int = 0
    instances: int = 0
    background_images: int = 0
    classes: int = 0
    class_names: list[str] = field(default_factory=list)
    instances_per_class: dict[str, int] = field(default_factory=dict)
    images_per_class: dict[str, int] = field(default_factory=dict)
    """For per-image class targets (classification): images of each class."""
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    bad_images: list[str] = field(default_factory=list)
    """Every image file training cannot use, as ``path: reason`` (``error`` names the first)."""
    exif_rotated_images: int = 0
    """Images whose EXIF Orientation tag (not 1) lucid ignores."""


@dataclass
class CheckReport:
    """The whole ``check`` result; ``ok`` is False when any split has an error."""

    data_root: str
    task: str
    fields: tuple[str, ...]
    splits: list[SplitReport]
    num_classes: int | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(s.error is None for s in self.splits if s.found) and any(s.found for s in self.splits)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        d["model.num_classes"] = self.num_classes
        return d


def image_tail_ok(path: Path) -> bool:
    """Cheap truncation test: a JPEG must end with EOI, a PNG with IEND (last 4 KiB)."""
    suffix = path.suffix.lower()
    if suffix not in (".jpg", ".jpeg", ".png"):
        return True
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - _TAIL_BYTES))
        tail = f.read()
    return (_JPEG_EOI in tail) if suffix in (".jpg", ".jpeg") else (_PNG_IEND in tail)


def infer_fields(data_root: Path, layout: str | None = None) -> tuple[str, ...]:
    """Guess the instance fields a root labels: a field whose YOLO rule the yaml declares (keypoints:
    ``kpt_shape``), the field with a DOTA rule for DOTA, the first field whose YOLO row rule accepts a
    label row (9 numbers: rotated boxes, other polygon rows: polygons, a plugin's own), a field whose
    COCO annotation file has its own prefix, else none (boxes)."""
    from lucidyolo.data.layouts import coco_candidates, detect_families
    from lucidyolo.structures.fields import registered_fields

    candidates = sorted(registered_fields(), key=lambda f: -f.guess_priority)  # stable: ties keep their order

    try:
        fam = detect_families(data_root, "train", ())
    except DataError:
        return ()
    if "dota" in fam and layout in (None, "dota"):  # the field the DOTA reader fills from a row's corners
        return next((f.attr_names for f in candidates if f.dota is not None), ())
    if "yolo" in fam and layout in (None, "yolo"):
        from lucidyolo.data.yolo import label_path_for, list_split, parse_yolo_yaml

        spec = parse_yolo_yaml(fam["yolo"].yaml)  # type: ignore[arg-type]
        declared = next((f for f in candidates if f.yolo and f.yolo.declares and f.yolo.declares(spec.raw)), None)
        if declared is not None:  # the yaml names the row format itself (kpt_shape)
            return declared.attr_names
        try:
            images = [Path(f) for f in list_split(spec, "train").files[:50]]
        except DataError:
            return ()
        # the first field (by guess priority: rotated boxes before polygons) whose row rule,
        # needing no meta from the yaml, accepts the row; a 5-number row is a box
        ruled = [f for f in candidates if f.yolo is not None and f.yolo.meta is None]
        for img in images:
            lab = label_path_for(img)
            if lab.is_file():
                for line in lab.read_text(encoding="utf-8", errors="replace").splitlines():
                    n = len(line.split())
                    if n == 5:
                        return ()
                    hit = next((f for f in ruled if n > 1 and f.yolo.accepts(n - 1, {})), None)  # type: ignore[union-attr]
                    if hit is not None:
                        return hit.attr_names
        return ()
    if "coco" not in fam and data_root.is_dir():
        # a COCO root found under a field's own annotation-file prefix (person_keypoints_*.json)
        for f in candidates:
            if f.coco is None or f.coco.ann_prefix is None:
                continue
            for _, img, ann in coco_candidates(data_root, "train", (f.name,)):
                if img.is_dir() and ann.is_file():
                    return f.attr_names
    return ()


def check_dataset(
    data_root: Path | None,
    fields: tuple[str, ...] | None = None,
    task: str = "",
    layout: str | None = None,
    splits: tuple[str, ...] = ("train", "val"),
    check_images: bool = True,
    decode: bool = False,
    reader: Any = None,
    **explicit_paths: Path | str | None,
) -> CheckReport:
    """Read each split and collect counts and the first problem.

    Args:
        data_root: dataset root (or ``None`` with explicit paths).
        fields: the task's instance fields (``TaskSpec.fields``); ``None`` =
            infer from the files (:func:`infer_fields`).
        task: the task's name, for the report only.
        layout: force a layout.
        splits: splits to look at; a split that does not exist is reported
            as not found (an error only if no split exists).
        check_images: open every image header and test for truncation.
        decode: fully decode every image (slow, thorough).
        reader: the task's own ``read_split`` hook (a layout the built-in
            readers do not know); its ``DataError`` saying "not found" for a
            split other than train reports that split as absent.
        **explicit_paths: ``train_images`` ... overrides.

    Returns:
        The report; never raises :class:`DataError` for problems in the data.
    """
    from lucidyolo.data.layouts import check_same_categories, read_split
    from lucidyolo.data.yolo import orphan_labels

    root = None if data_root is None else Path(data_root)
    if root is not None and not root.exists():
        raise DataError(f"Dataset root {root} does not exist.", fix="Check the --data-root path.")
    if fields is None:
        fields = infer_fields(root, layout) if root is not None else ()
    fields = tuple(fields)
    explicit = {k: v for k, v in explicit_paths.items() if v is not None}
    reports: list[SplitReport] = []
    sources = {}
    seen_warnings: set[str] = set()
    for split in splits:
        rep = SplitReport(split=split, found=True)
        reports.append(rep)
        has_explicit = f"{split}_images" in explicit or f"{split}_ann_file" in explicit
        if reader is None and not has_explicit and root is not None:
            from lucidyolo.data.layouts import detect_families

            try:
                fams = detect_families(root, split, fields)
            except DataError as exc:
                rep.error = str(exc)
                continue
            if split != "train" and (not fams or _yolo_lacks_split(fams, split, layout)):
                rep.found = False
                continue
        try:
            # The readers warn (e.g. about a yaml's `path:`); the report carries
            # each distinct warning once instead of a Python warning line.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if reader is not None:
                    src = reader(root=root, split=split, fields=fields, layout=layout, explicit_paths=explicit)
                else:
                    src = read_split(root, split, fields, layout=layout, explicit_paths=explicit)
        except DataError as exc:
            if reader is not None and split != "train" and "not found" in str(exc).lower():
                rep.found = False
            else:
                rep.error = str(exc)
                if isinstance(exc, BadImagesError):  # the reader read every header and names each bad file
                    rep.bad_images = [f"{p}: {reason}" for p, reason in exc.bad]
            continue
        for w in caught:
            if str(w.message) not in seen_warnings:
                seen_warnings.add(str(w.message))
                rep.warnings.append(str(w.message))
        sources[split] = src
        rep.layout = src.layout
        rep.layout_description, rep.paths = src.layout, []
        if reader is None and not has_explicit and root is not None:
            rep.layout_description, rep.paths = _describe(root, split, fields, layout)
        rep.images = len(src)
        rep.instances = src.num_instances
        rep.background_images = int((src.instances_per_image() == 0).sum())
        rep.classes = src.num_classes
        rep.class_names = list(src.class_names)
        counts = src.instance_counts()
        rep.instances_per_class = {n: int(c) for n, c in zip(src.class_names, counts, strict=True)}
        image_classes = src.image_class_counts()
        if image_classes is not None:
            rep.images_per_class = {n: int(c) for n, c in zip(src.class_names, image_classes, strict=True)}
            rep.background_images = 0  # every image carries its own target
        label_error = None
        if split == "train":
            # the check `lucid fit` runs on its training split
            try:
                coverage = check_label_coverage(src, split)
            except DataError as exc:
                label_error, coverage = str(exc), None
        else:
            coverage = label_coverage_warning(src, split)
            if coverage is None and image_classes is None and src.num_instances == 0:
                coverage = "the split has no instances at all (every image is background)."
        if coverage is not None:
            rep.warnings.append(coverage)
        if (duplicates := duplicate_rows_warning(src)) is not None:
            rep.warnings.append(duplicates)
        if src.layout == "yolo" and root is not None:
            from lucidyolo.data.layouts import resolve

            yaml_path = resolve(root, split, fields, layout).yaml
            assert yaml_path is not None
            orphans = orphan_labels(yaml_path, split)
            if orphans and label_error is None:
                label_error = f"{orphans[0]}:1: label file has no image beside it ({len(orphans)} such files)."
        if check_images:
            scan = scan_images(src, decode)
            rep.bad_images = [f"{p}: {reason}" for p, reason in scan.bad]
            if scan.bad:
                rep.error = f"{len(scan.bad)} image file(s) cannot be used; the first is {rep.bad_images[0]}."
            rep.exif_rotated_images = len(scan.exif_rotated)
            if scan.exif_rotated:
                rep.warnings.append(exif_warning(scan.exif_rotated))
        # a label problem is named first; the bad images stay listed beside it
        rep.error = label_error or rep.error
    found = {s: src for s, src in sources.items()}
    err = None
    if len(found) >= 2:
        names = list(found)
        for s in names[1:]:
            try:
                check_same_categories(found[names[0]], found[s])
            except DataError as exc:
                err = str(exc)
    if not any(r.found for r in reports):
        err = err or f"No split of {root} was found."
    num_classes = next((src.num_classes for src in found.values()), None)
    return CheckReport(str(root) if root is not None else "", task, fields, reports, num_classes, err)


def _yolo_lacks_split(fams: dict, split: str, layout: str | None) -> bool:
    """A YOLO yaml without this (non-train) split: "not found", like a missing COCO split."""
    if "yolo" not in fams or len(fams) > 1 or layout not in (None, "yolo"):
        return False
    from lucidyolo.data.yolo import parse_yolo_yaml

    try:
        return parse_yolo_yaml(fams["yolo"].yaml).split_key(split) is None
    except DataError:
        return False  # reading the split reports the problem


def _describe(root: Path, split: str, fields: tuple[str, ...], layout: str | None) -> tuple[str, list[str]]:
    """The recognised layout in words and the folders / files the split is read from."""
    from lucidyolo.data.layouts import resolve

    r = resolve(root, split, fields, layout)
    if r.layout == "yolo":
        from lucidyolo.data.yolo import list_split, parse_yolo_yaml

        assert r.yaml is not None
        files = list_split(parse_yolo_yaml(r.yaml), split)
        return files.description, [str(p.path) for p in files.paths]
    if r.layout == "dota":
        assert r.split_dir is not None
        return "DOTA", [str(r.split_dir / "images"), str(r.split_dir / "labelTxt")]
    return f"COCO ({r.layout})", [str(r.images), str(r.ann_file)]


@dataclass
class ImageScan:
    """What one pass over a split's image files found.

    Attributes:
        bad: ``(path, reason)`` of every file training cannot use, in split order.
        exif_rotated: usable files whose EXIF Orientation tag (not 1) lucid ignores.
    """

    bad: list[tuple[Path, str]]
    exif_rotated: list[Path]


def scan_bad_images(src, decode: bool = False) -> list[tuple[Path, str]]:
    """Every image file of a split that training cannot use, with the reason.

    Args:
        src: the split (an :class:`~lucidyolo.data.source.ImageSource`).
        decode: also decode every file fully (slow: a full decode per image);
            without it only the header and the file's last 4 KiB are read,
            which finds missing, unreadable, truncated, float and wrongly
            sized files but not corruption inside the pixel data (nor 32-bit
            integer values beyond 16 bits).

    Returns:
        ``(path, reason)`` per bad file, in the split's image order; ``reason``
        is one sentence without the path (``"is truncated (no end-of-image
        marker)"``). Empty when every file is usable.
    """
    return scan_images(src, decode).bad


SCAN_SHARES_FROM = 500
"""Images from which :func:`scan_images` reads on every core (each costs ~0.2 ms: a header and a 4 KiB tail)."""


def scan_images(src, decode: bool = False) -> ImageScan:
    """One pass over a split's image files (see :func:`scan_bad_images`), also collecting EXIF rotations.

    Large splits are read on every core (:mod:`~lucidyolo.data.core_shares`), in order.
    """
    shares = map_shares(lambda a, b: _scan_range(src, decode, a, b), len(src), SCAN_SHARES_FROM)
    return ImageScan([b for s in shares for b in s.bad], [r for s in shares for r in s.exif_rotated])


def _scan_range(src, decode: bool, start: int, stop: int) -> ImageScan:
    bad: list[tuple[Path, str]] = []
    rotated: list[Path] = []
    for i in range(start, stop):
        p = src.image_path(i)
        reason = None
        try:
            head = read_image_header(p)
            refuse_unscalable_mode(head.mode, p)
            want = src.image_hw(i)
            if head.hw != want:
                reason = f"is {head.hw[0]}x{head.hw[1]} but the annotations say {want[0]}x{want[1]} (HxW)"
                if head.orientation >= 5 and head.hw[::-1] == want:
                    reason += "; its EXIF orientation turns it by 90 degrees, so the annotations were made on the turned view"
            elif not image_tail_ok(p):
                reason = "is truncated (no end-of-image marker)"
            elif decode:
                read_image(p)
            if reason is None and head.orientation != 1:
                rotated.append(p)
        except DataError as exc:
            reason = image_error_reason(exc, p)
        except OSError as exc:  # the file vanished or cannot be read between the header and the tail
            reason = f"cannot be read ({exc.strerror or exc})"
        if reason is not None:
            bad.append((p, reason))
    return ImageScan(bad, rotated)


def exif_warning(paths: list[Path]) -> str:
    """The warning about images whose EXIF orientation lucid ignores (count and a few examples)."""
    shown = ", ".join(str(p) for p in paths[:_EXAMPLES]) + (", ..." if len(paths) > _EXAMPLES else "")
    return (
        f"{len(paths)} image(s) carry an EXIF Orientation tag that turns or mirrors them ({shown}). "
        "lucid ignores the tag and uses the pixels in their stored order, in training, evaluation and prediction alike. "
        "If the labels were drawn on the turned view (most labelling tools and viewers apply the tag), they do not line "
        "up with those pixels: re-save these images with the rotation applied "
        "(e.g. `PIL.ImageOps.exif_transpose(im).save(path)`) and keep the labels. "
        "If the labels follow the stored pixels, nothing needs to change."
    )
