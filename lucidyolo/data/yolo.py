"""YOLO-format root reader: a ``data.yaml`` plus ``images/`` and ``labels/`` text files.

One row per instance: the class id, then numbers normalised to ``[0, 1]``.
What the numbers mean is the rule of the task's field that has one
(:class:`~lucidyolo.structures.field_io.YoloRows`: polygon rows for
segmentation, 4-corner rows for rotated boxes, pose rows with ``kpt_shape``,
or a plugin's own); a task with no such field reads box rows ``c cx cy w h``
(a polygon row is accepted too; its enclosing box is used). The fields' rules
also read their dataset meta from the yaml (``kpt_shape``, ``flip_idx``).

Labels sit beside images with ``images`` replaced by ``labels`` in the path. A
missing or empty label file is a background image. Coordinates slightly
outside ``[0, 1]`` (objects cut by a tile edge) are clipped, not rejected.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.data.image_io import (
    IMAGE_SUFFIXES,
    BadImagesError,
    image_error_reason,
    read_image_size,
)
from lucidyolo.data.label_index import SplitReader, index_folder, index_path, scan_split
from lucidyolo.data.source import ImageSource
from lucidyolo.data.yaml_paths import SplitPath, dataset_root, resolve_split_path, through_symlink
from lucidyolo.errors import DataError
from lucidyolo.structures.field_io import YoloRows
from lucidyolo.structures.fields import FieldSpec, field_specs
from lucidyolo.structures.targets import Targets

# Normalised coordinates beyond this are not "slightly outside": they are
# almost certainly pixel coordinates written into a YOLO file.
_MAX_ABS_NORMALISED = 2.0


# A Roboflow export names its validation folder `valid/`; users then ask for
# that split by the folder's name, or write the key that way.
_SPLIT_SYNONYMS = {"val": "valid", "valid": "val"}


@dataclass
class YoloSpec:
    """The parsed, validated content of a YOLO ``data.yaml``.

    ``splits`` keeps the entries as written; they are resolved (and refused if
    they leave the root) only when that split is read, so a broken ``test:``
    never stops training. ``warnings`` are about ``path:`` (see
    :mod:`lucidyolo.data.yaml_paths`). ``raw`` is the whole mapping: the
    fields' row rules read their own keys from it (``kpt_shape``).
    """

    yaml_path: Path
    root: Path
    splits: dict[str, list[str]]
    class_names: list[str]
    raw: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def split_key(self, split: str) -> str | None:
        """The yaml key that holds ``split`` (``val`` and ``valid`` stand for each other)."""
        if split in self.splits:
            return split
        other = _SPLIT_SYNONYMS.get(split)
        return other if other in self.splits else None


def _load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise DataError(f"Dataset yaml {path} does not exist.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise DataError(f"{loc}: not valid YAML ({getattr(exc, 'problem', exc)}).", fix="Fix the yaml syntax.") from None
    if not isinstance(data, dict):
        raise DataError(f"{path} is not a YOLO dataset yaml (expected a mapping with train/val/names).")
    return data


def _class_names(data: dict[str, Any], yaml_path: Path) -> list[str]:
    """``names`` as a list or a ``0..K-1`` mapping; ``nc`` alone gives ``class_0 ..``."""
    nc_raw = data.get("nc")
    nc = None
    if nc_raw is not None:
        try:
            nc = int(nc_raw)
        except (TypeError, ValueError):
            nc = -1
        if nc <= 0 or isinstance(nc_raw, bool) or float(nc_raw) != nc:
            raise DataError(f"{yaml_path}: nc={nc_raw!r} is not a positive whole number.", fix="Set nc to the class count, or drop it and list `names`.")
    names_raw = data.get("names")
    if isinstance(names_raw, dict):
        try:
            keys = sorted(int(k) for k in names_raw)
        except (TypeError, ValueError):
            raise DataError(f"{yaml_path}: 'names' keys must be integers 0..K-1.") from None
        if keys != list(range(len(keys))):
            raise DataError(f"{yaml_path}: 'names' keys {keys} are not 0..{len(keys) - 1}.", fix="Number classes contiguously from 0.")
        class_names = [str(names_raw[k] if k in names_raw else names_raw[str(k)]) for k in keys]
    elif isinstance(names_raw, list):
        class_names = [str(n) for n in names_raw]
    elif names_raw is None and nc is not None:
        # Exports that only count their classes: the labels are still 0..nc-1.
        return [f"class_{i}" for i in range(nc)]
    else:
        raise DataError(f"{yaml_path}: 'names' is missing or not a list/mapping.", fix="Add `names: [class0, class1, ...]` (or at least `nc: K`).")
    if not class_names:
        raise DataError(f"{yaml_path}: 'names' is empty.", fix="List at least one class.")
    if nc is not None and nc != len(class_names):
        raise DataError(f"{yaml_path}: nc={nc} but 'names' has {len(class_names)} entries.", fix="Make nc match names (or drop nc).")
    return class_names


def parse_yolo_yaml(yaml_path: Path) -> YoloSpec:
    """Validate a YOLO dataset yaml.

    ``path`` (optional) sets the root and ``train`` / ``val`` / ``test``
    entries are relative to it, by the rule in :mod:`lucidyolo.data.yaml_paths`.

    Raises:
        DataError: missing ``names`` (and ``nc``). Keys a field's rule reads
            (``kpt_shape``) are checked by that rule, when the field is read.
    """
    data = _load_yaml(yaml_path)
    where = dataset_root(yaml_path, data.get("path"))
    class_names = _class_names(data, yaml_path)

    splits: dict[str, list[str]] = {}
    for split in ("train", "val", "valid", "test"):
        v = data.get(split)
        if v in (None, "") or v == []:
            continue
        splits[split] = [str(e) for e in (v if isinstance(v, list) else [v])]

    return YoloSpec(yaml_path, where.root, splits, class_names, data, where.warnings)


def find_yolo_yaml(root: Path) -> list[Path]:
    """Candidate dataset yaml files of a root: ``data.yaml`` first, else every ``*.yaml``."""
    if root.is_file() and root.suffix in (".yaml", ".yml"):
        return [root]
    if not root.is_dir():
        return []
    for n in ("data.yaml", "data.yml"):
        if (root / n).is_file():
            return [root / n]
    return sorted(p for p in root.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


@dataclass
class SplitFiles:
    """The files of one split and how they were found (``lucid data check`` prints both).

    ``files``: the image paths in listing order, as strings (a split may hold millions).

    ``skipped_links``: ``(link, reason)`` of every symbolic link below the
    split's folders that was not followed (see :func:`_image_files`).
    """

    files: list[str]
    paths: list[SplitPath]
    notes: list[str]
    skipped_links: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def images(self) -> list[Path]:
        """:attr:`files` as paths."""
        return [Path(f) for f in self.files]

    @property
    def description(self) -> str:
        return ", ".join(["YOLO", *self.notes])


#: Skipped links a warning names; the rest are counted.
_SHOWN_LINKS = 5


def _under(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies below it (both real, absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _dead_link_reason(path: str) -> str | None:
    """Why the link ``path`` cannot be followed (None when its target exists)."""
    import errno

    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "loop"  # a link to itself, or a ring of links
        if exc.errno == errno.ENOENT:
            return "broken link"
        return f"cannot be followed: {exc.strerror}"
    return None


def _image_files(folder: Path, other_splits: dict[str, list[Path]] | None = None) -> tuple[list[str], bool, list[tuple[Path, str]]]:
    """Images below ``folder``, following symlinked sub-folders.

    Returns the paths of the images (sorted as :class:`~pathlib.Path` sorts them), whether a symlinked folder was followed, and
    ``(link, reason)`` for each link that was not: ``"loop"`` (it leads back
    to a folder it sits in, or above it: the walk would reach the parent's
    other folders, e.g. the val images), ``"into split 'val'"`` (it lands in
    another split's folder of ``other_splits``, whose images would leak into
    this split), ``"broken link"``.

    ``Path.rglob`` does not descend into symlinked folders, so an image store
    shared through a link would be silently missing; such links are followed.
    Each real folder is still visited once, so two links to one store do not
    list it twice.
    """
    top = os.path.realpath(folder)
    others = [(name, os.path.realpath(p)) for name, ps in (other_splits or {}).items() for p in ps]

    def refused(link: str, chain: list[str]) -> str | None:
        target = os.path.realpath(link)
        if any(_under(c, target) for c in chain):
            return "loop"
        if _under(target, top):
            # a folder of this split (even one inside another split's folder, as with `val: images`):
            # listed once whichever way it is reached
            return None
        for name, o in others:
            if _under(target, o):
                return f"into split {name!r}"
        return None

    seen: set[str] = set()
    out: list[str] = []
    skipped: list[tuple[Path, str]] = []
    followed = False

    # os.walk(followlinks=True), depth-first, on the DirEntry kinds scandir already has (no stat per file: a
    # split of 10^5 images lists in a fraction of a second). Each folder's entries are taken in name order, a
    # sub-folder's files in its place: that is Path order (part by part, "a/x" before "a-b/x"), the order of
    # the image ids, with no sort of the whole list.
    def walk(dirpath: str, chain_above: list[str]) -> None:
        nonlocal followed
        real = os.path.realpath(dirpath)
        if real in seen:
            return
        seen.add(real)
        chain = [*chain_above, real]
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return  # as os.walk: an unreadable folder lists nothing
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if e.is_symlink():
                    reason = refused(e.path, chain)
                    if reason is not None:
                        skipped.append((Path(e.path), reason))
                        continue
                    followed = True
                walk(e.path, chain)
                continue
            # a link it cannot stat (dangling, or a ring) lands here among the files, as in os.walk
            reason = (_dead_link_reason(e.path) or refused(e.path, chain)) if e.is_symlink() else None
            if reason is not None:
                skipped.append((Path(e.path), reason))
            elif os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES and e.is_file():
                out.append(e.path)

    walk(os.fspath(folder), [])
    return out, followed, sorted(skipped)


def skipped_links_warning(split: str, skipped: list[tuple[Path, str]]) -> str | None:
    """The warning naming the links of ``split`` that were not followed (None when none was skipped)."""
    if not skipped:
        return None
    shown = ", ".join(f"{p} ({reason})" for p, reason in skipped[:_SHOWN_LINKS])
    more = f" and {len(skipped) - _SHOWN_LINKS} more" if len(skipped) > _SHOWN_LINKS else ""
    return (
        f"{len(skipped)} symbolic link(s) below the {split} split's folder were skipped: {shown}{more}. "
        "Following a loop would read the folders above the split (the other splits' images too), and a link into "
        "another split would put its images in this one. Remove or repoint the links to silence this."
    )


def list_split(spec: YoloSpec, split: str) -> SplitFiles:
    """Resolve the entries of ``split`` and list its images (sorted per entry).

    Raises:
        DataError: no such entry, an entry leaving the root, a list line
            naming a missing image, or an entry that is neither folder nor list.
    """
    key = spec.split_key(split)
    if key is None:
        raise DataError(f"{spec.yaml_path} has no {split!r} entry.", fix=f"Add `{split}: images/{split}` to the yaml.")
    out: list[str] = []
    paths: list[SplitPath] = []
    skipped: list[tuple[Path, str]] = []
    symlinked = listed = False
    others = _other_split_folders(spec, key)
    for e in spec.splits[key]:
        sp = resolve_split_path(e, spec.root, f"{spec.yaml_path}: {key} path")
        paths.append(sp)
        p = sp.path
        symlinked = symlinked or through_symlink(p, spec.root)
        if p.is_dir():
            found, followed, refused = _image_files(p, others)
            out.extend(found)
            skipped.extend(refused)
            symlinked = symlinked or followed
        elif p.is_file() and p.suffix == ".txt":
            listed = True
            for ln, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                q = resolve_split_path(line, spec.root, f"{p}:{ln}: image path", also_relative_to=p.parent).path
                if not q.is_file():
                    raise DataError(f"{p}:{ln}: image {q} does not exist.", fix="Remove the line or restore the image.")
                out.append(str(q))
        else:
            raise DataError(
                f"{spec.yaml_path}: {key} entry {e!r} resolves to {p}, which is neither a folder nor a .txt list.",
                fix="Point it at an image folder or a .txt file listing images.",
            )
    notes = [n for n, on in (("Roboflow-style export", any(s.export for s in paths)), ("symlinked images", symlinked), ("image list file", listed)) if on]
    return SplitFiles(out, paths, notes, skipped)


def _other_split_folders(spec: YoloSpec, key: str) -> dict[str, list[Path]]:
    """The folders of the yaml's other split entries (a link into one is not followed)."""
    out: dict[str, list[Path]] = {}
    for name, entries in spec.splits.items():
        if name == key:
            continue
        for e in entries:
            try:
                p = resolve_split_path(e, spec.root, f"{spec.yaml_path}: {name} path").path
            except DataError:
                continue  # reading that split reports it; a broken `test:` never stops this one
            if p.is_dir():
                out.setdefault(name, []).append(p)
    return out


def label_path_for(image: Path) -> Path:
    """``.../images/x/a.jpg`` -> ``.../labels/x/a.txt`` (last ``images`` component)."""
    parts = list(image.parts)
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] == "images":
            parts[i] = "labels"
            return Path(*parts).with_suffix(".txt")
    return image.with_suffix(".txt")


def _parse_float(tok: str, where: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise DataError(f"{where}: {tok!r} is not a number.", fix="Fix or remove the row.") from None
    if not math.isfinite(v):
        raise DataError(f"{where}: value {tok!r} is NaN or infinite.", fix="Fix or remove the row.")
    return v


def _box_read(rows: list[np.ndarray], hw: tuple[int, int], meta: Any, where: list[str]) -> tuple[np.ndarray, dict[str, Any]]:
    """Box rows ``cx cy w h``; polygon rows give their enclosing box (a seg root read for detection)."""
    scale = np.array([hw[1], hw[0]], np.float64)
    for r, loc in zip(rows, where, strict=True):
        if r.size == 4 and (r[2] < 0 or r[3] < 0):
            raise DataError(f"{loc}: negative box size w={r[2]:g} h={r[3]:g}.", fix="Fix or remove the row.")
    if all(r.size == 4 for r in rows):
        b = np.stack(rows)
        cxcy, wh = b[:, :2] * scale, b[:, 2:4] * scale
        return np.concatenate([cxcy - wh / 2, cxcy + wh / 2], 1), {}
    rings = [np.clip(r.reshape(-1, 2) * scale, 0, scale) if r.size != 4 else _cxcywh_corners(r, scale) for r in rows]
    return np.stack([np.concatenate([q.min(0), q.max(0)]) for q in rings]), {}


BOX_ROWS = YoloRows(
    kind="box",
    need=lambda meta: "5 fields (c cx cy w h) or a polygon row",
    accepts=lambda count, meta: count == 4 or (count >= 6 and count % 2 == 0),
    read=_box_read,
)
"""The rows of a task none of whose fields has a YOLO row rule (detection)."""


def row_rule(fields: tuple[str, ...], yaml_path: Path) -> tuple[YoloRows, tuple[FieldSpec, ...]]:
    """The rule that reads the task's rows and the fields it fills (none: :data:`BOX_ROWS`).

    Raises:
        DataError: two fields both define a row (a YOLO row holds one geometry),
            or a field has no YOLO rule and no default (``fill_missing``): it
            would be trained on zeros.
    """
    specs = field_specs(fields)
    ruled = [f for f in specs if f.yolo is not None]
    if len(ruled) > 1:
        raise DataError(
            f"{yaml_path}: the task's fields {', '.join(repr(f.name) for f in ruled)} each define a YOLO row; "
            "a YOLO label row holds one of them.",
            fix="Read this task's data from a COCO JSON, or give the task one field with a YOLO row rule.",
        )
    unread = [f.name for f in specs if f.yolo is None and not all(a.fill_missing for a in f.attrs)]
    if unread:
        raise DataError(
            f"{yaml_path}: the task's field {unread[0]!r} cannot be read from YOLO label rows.",
            why="no YOLO row rule fills it (FieldSpec.yolo), and training it on zeros would be silently wrong.",
            fix=f"Read the data with a layout that has {unread[0]!r} (e.g. a COCO JSON), or give the field a YOLO row rule.",
        )
    return (ruled[0].yolo, tuple(ruled)) if ruled else (BOX_ROWS, ())  # type: ignore[return-value]


def _parse_rows(path: Path, rule: YoloRows, meta: dict[str, Any], nc: int) -> tuple[np.ndarray, list[np.ndarray], list[str]]:
    """Parse one label file into (classes, per-row float arrays, locations)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return np.zeros(0, np.int64), [], []
    except UnicodeDecodeError:
        raise DataError(f"{path}: label file is not UTF-8 text.", fix="Replace it with a YOLO text label file.") from None
    classes: list[int] = []
    rows: list[np.ndarray] = []
    locs: list[str] = []
    for ln, line in enumerate(text.splitlines(), 1):
        toks = line.split()
        if not toks:
            continue
        where = f"{path}:{ln}"
        n = len(toks)
        if not rule.accepts(n - 1, meta):
            raise DataError(f"{where}: row has {n} fields; {rule.kind} rows need {rule.need(meta)}.", fix="Fix the row or pick the matching --task.")
        c = _parse_float(toks[0], where)
        if c != int(c) or not 0 <= int(c) < nc:
            raise DataError(
                f"{where}: class id {toks[0]} is out of range 0..{nc - 1}.",
                why=f"the yaml declares {nc} names.",
                fix="Fix the label or add the class to `names`.",
            )
        vals = np.array([_parse_float(t, where) for t in toks[1:]], dtype=np.float64)
        if np.abs(vals).max(initial=0.0) > _MAX_ABS_NORMALISED:
            raise DataError(
                f"{where}: coordinate {vals[np.argmax(np.abs(vals))]:g} is far outside [0, 1].",
                why="YOLO rows are normalised by the image size; this looks like pixels.",
                fix="Divide x by the image width and y by its height.",
            )
        classes.append(int(c))
        rows.append(vals)
        locs.append(where)
    return np.asarray(classes, np.int64), rows, locs


def _cxcywh_corners(r: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Two opposite corners of a normalised ``cx cy w h`` row, in pixels."""
    c, half = r[:2] * scale, r[2:4] * scale / 2
    return np.stack([c - half, c + half])


def _targets_from_rows(
    classes: np.ndarray, rows: list[np.ndarray], locs: list[str], rule: YoloRows, fields: tuple[str, ...],
    hw: tuple[int, int], meta: dict[str, Any],
) -> Targets:
    """One file's rows as targets in pixels; instances whose box has no area after clipping are dropped.

    A rule that returns no boxes (a task whose instances have none) gets zero
    boxes, which the engine carries but no rule of such a task reads.
    """
    n = len(rows)
    if n == 0:
        return Targets.empty_for_fields(fields, meta=meta)
    boxes, values = rule.read(rows, hw, meta, locs)
    if boxes is None:
        return Targets(boxes=np.zeros((n, 4)), labels=classes, difficult=np.zeros(n, bool), **values)
    h, w = hw
    boxes = np.clip(boxes, 0, np.array([w, h, w, h], np.float64))
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    t = Targets(boxes=boxes, labels=classes, difficult=np.zeros(n, bool), **values)
    return t if keep.all() else t.filter(keep)


def read_label_file(path: Path, fields: tuple[str, ...], num_classes: int, hw: tuple[int, int],
                    meta: dict[str, Any] | None = None) -> Targets:
    """One YOLO label file as the reader reads it for ``fields`` (``meta``: what the yaml gives the row rule,
    e.g. ``{"num_keypoints": 17, "kpt_dims": 3}``); pixel targets of an image of size ``hw = (h, w)``."""
    rule, _ = row_rule(fields, path)
    meta = dict(meta or {})
    classes, rows, locs = _parse_rows(path, rule, meta, num_classes)
    return _targets_from_rows(classes, rows, locs, rule, fields, hw, meta)


def _label_paths(images: list[str]) -> list[str]:
    """:func:`label_path_for` of every image, worked out once per folder (a split holds 10^5 files in a few folders)."""
    folders: dict[str, str] = {}
    out = []
    for img in images:
        cut = img.rfind(os.sep)
        folder = img[:cut]
        lf = folders.get(folder)
        if lf is None:
            lf = folders[folder] = str(label_path_for(Path(folder) / "x.jpg").parent)
        dot = img.rfind(".")
        # as Path.with_suffix: a name's last dot starts its suffix, unless it leads the name or ends it
        stem = img[cut:dot] if cut + 1 < dot < len(img) - 1 else img[cut:]
        out.append(lf + stem + ".txt")
    return out


def _first_per_folder(paths: list[str], chosen: np.ndarray) -> list[int]:
    """One chosen image index per image folder (the label folders follow the image folders)."""
    seen: dict[str, int] = {}
    for i in chosen.tolist():
        seen.setdefault(os.path.dirname(paths[i]), i)
    return list(seen.values())


def _read_targets(label: Path, rule: YoloRows, fields: tuple[str, ...], meta: dict[str, Any], nc: int,
                  hw: tuple[int, int]) -> Targets:
    classes, rows, locs = _parse_rows(label, rule, meta, nc)
    return _targets_from_rows(classes, rows, locs, rule, fields, hw, meta)


def _index_key(yaml_path: Path, rule: YoloRows, meta: dict[str, Any]) -> str:
    """What a YOLO split's scan depends on besides its files: lucid, the yaml's bytes, the row rule, the pixel limit."""
    import hashlib
    import json
    import sys

    from lucidyolo._version import __version__
    from lucidyolo.data.pixel_limit import max_image_pixels

    module = sys.modules.get(getattr(rule.read, "__module__", ""), None)
    rule_file = getattr(module, "__file__", None)
    rule_mtime = os.stat(rule_file).st_mtime_ns if rule_file and os.path.exists(rule_file) else 0
    parts = [__version__, hashlib.sha256(yaml_path.read_bytes()).hexdigest(), rule.kind,
             getattr(rule.read, "__qualname__", ""), rule_mtime, max_image_pixels(),
             json.dumps(meta, sort_keys=True, default=str)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def read_yolo(yaml_path: Path, split: str, fields: tuple[str, ...], *, name: str = "") -> ImageSource:
    """Read one split of a YOLO root.

    Args:
        yaml_path: the dataset yaml.
        split: ``train | val | test``.
        fields: the task's instance fields; the one with a YOLO row rule reads
            the rows and its meta from the yaml (:func:`row_rule`); with none,
            rows are boxes (polygon rows give their box).
        name: description for messages.

    Returns:
        The split; image ids are indices in sorted path order; category ids
        are ``0..C-1``.

    Raises:
        DataError: bad yaml, malformed row (``file:line``), or no images at
            all; :class:`~lucidyolo.data.image_io.BadImagesError` naming every
            image whose header cannot be read.
    """
    spec = parse_yolo_yaml(yaml_path)
    rule, ruled = row_rule(fields, yaml_path)
    meta: dict[str, Any] = {}
    for f in ruled:
        if f.yolo is not None and f.yolo.meta is not None:
            meta.update(f.yolo.meta(spec.raw, yaml_path))
    for message in spec.warnings:
        warnings.warn(message, UserWarning, stacklevel=2)
    files = list_split(spec, split)
    if (skipped := skipped_links_warning(split, files.skipped_links)) is not None:
        warnings.warn(skipped, UserWarning, stacklevel=2)
    images = files.files
    if not images:
        raise DataError(
            f"{yaml_path}: the {split} split contains no images.",
            why="an empty split cannot be trained or evaluated.",
            fix=f"Check the {split!r} entry; images need one of {', '.join(IMAGE_SUFFIXES)}.",
        )
    nc = len(spec.class_names)
    paths = images
    labels = _label_paths(paths)
    root = str(spec.root).rstrip(os.sep) + os.sep
    # As written, not resolved: an image reached through a symlink inside the root keeps its path under the root.
    rels = [p[len(root):] if p.startswith(root) else Path(p).relative_to(spec.root).as_posix() for p in paths]
    reader = SplitReader(
        fields=tuple(fields), meta=meta, image_size=read_image_size,
        targets=lambda label, hw: _read_targets(Path(label), rule, fields, meta, nc, hw),
        bad_reason=image_error_reason,
        source_args={"root": spec.root, "class_names": spec.class_names, "category_ids": list(range(nc)),
                     "name": name or f"{yaml_path} [{split}]", "layout": "yolo"},
        key=_index_key(yaml_path, rule, meta),
    )
    folder = index_folder()
    scan = scan_split(reader, paths, labels, rels, None if folder is None else index_path(folder, yaml_path, split, fields))
    src = scan.source
    good = np.asarray(src.all_image_ids())
    label_dirs = {os.path.dirname(labels[i]) for i in _first_per_folder(paths, good)}
    src.labels_from = Path(os.path.commonpath(sorted(label_dirs))) if label_dirs else None
    src.images_without_label_file = int(scan.label_missing[good].sum())
    bad = scan.bad
    if bad:
        p, reason = bad[0]
        raise BadImagesError(
            f"{len(bad)} image file(s) of the {split} split of {yaml_path} cannot be read; the first is {p}: {reason}.",
            why="training reads every image; an unreadable one stops it.",
            fix="Remove or replace them (`lucid data check` lists every one), or train on the rest with "
                "`--data.skip_bad_images true`.",
            bad=bad, rest=src,
        )
    return src


def orphan_labels(yaml_path: Path, split: str) -> list[Path]:
    """Label files of a split that have no image beside them (reported by check).

    Folders are compared by their real paths (a label folder reached through a
    link), each resolved once: a split of 10^5 files needs no resolve per file.
    """
    spec = parse_yolo_yaml(yaml_path)
    labels = _label_paths(list_split(spec, split).files)
    real: dict[str, str] = {}

    def key(folder: str, name: str) -> tuple[str, str]:
        if folder not in real:
            real[folder] = os.path.realpath(folder)
        return real[folder], name

    expected = {key(*os.path.split(p)) for p in labels}
    found: list[Path] = []
    for d in sorted({os.path.dirname(p) for p in labels}, key=lambda f: f.split(os.sep)):
        try:
            with os.scandir(d) as it:
                names = sorted(e.name for e in it if e.name.endswith(".txt") and not e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            continue
        found.extend(Path(d, n) for n in names if key(d, n) not in expected)
    return found
