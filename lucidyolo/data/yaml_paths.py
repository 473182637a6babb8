"""Where a YOLO dataset yaml may point: its root (``path:``) and its split paths.

The rule (docs/decisions/data.md, "Where a dataset yaml may point"):

- The root is the yaml's folder. ``path:`` may move it: to a folder inside the
  yaml's folder (relative or absolute), or to any existing folder named by an
  *absolute* path (honoured with a warning naming it). A relative ``path:``
  leaving the folder, or one that does not exist here, is ignored with a
  warning (yamls copied between machines and tools carry foreign ones).
- A split path (folder, ``.txt`` list, or a line of such a list) must lie
  inside the root *as written*: ``..`` is collapsed as text and symlinks are
  not followed, so a folder that is a symlink inside the root is inside,
  wherever it leads. The person who published the root put the link there and
  the user pointed us at the root.
- A split path that leaves the root is read as the export convention
  (``../train/images`` -> ``<root>/train/images``: the yaml was written for a
  subfolder) when that folder exists; otherwise it is refused.

Reading is harmless: readers only open files for reading, and nothing a yaml
says decides where anything is written (run directory and cache only). The
containment protects against *silently reading other data*: a yaml from
elsewhere whose ``../`` paths happen to exist on this machine would train on a
sibling dataset the user never named. Only an absolute ``path:`` can take the
root elsewhere, and it says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lucidyolo.errors import DataError


def lexical(path: str | os.PathLike[str]) -> Path:
    """Absolute path with ``.`` and ``..`` collapsed as text; symlinks are not followed."""
    return Path(os.path.normpath(os.path.abspath(os.fspath(path))))


def lies_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """``path`` is ``root`` or below it, compared as written (see :func:`lexical`)."""
    p, r = lexical(path), lexical(root)
    return p == r or r in p.parents


def through_symlink(path: Path, root: Path) -> bool:
    """Some folder between ``root`` (excluded) and ``path`` (included) is a symlink."""
    p, r = lexical(path), lexical(root)
    while p != r and r in p.parents:
        if p.is_symlink():
            return True
        p = p.parent
    return False


@dataclass
class DatasetRoot:
    """The folder split paths are relative to, and what the user should hear about ``path:``."""

    root: Path
    warnings: list[str] = field(default_factory=list)


def dataset_root(yaml_path: Path, path_value: object) -> DatasetRoot:
    """Apply the ``path:`` rule (module docstring) to a yaml's ``path`` value."""
    base = lexical(yaml_path.parent)
    if path_value is None or str(path_value).strip() == "":
        return DatasetRoot(base)
    text = str(path_value)
    given = Path(text).expanduser()
    if given.is_absolute():
        cand = lexical(given)
        if cand == base or (cand.is_dir() and os.path.samefile(cand, base)):
            return DatasetRoot(base)
        if cand.is_dir():
            return DatasetRoot(cand, [f"{yaml_path.name} sets `path: {text}`, outside its own folder {base}; the dataset is read from {cand}."])
        return DatasetRoot(base, [f"{yaml_path.name} sets `path: {text}`, which does not exist here; the dataset is read from the yaml's folder {base}."])
    cand = lexical(base / given)
    if lies_inside(cand, base) and cand.is_dir():
        return DatasetRoot(cand)
    reason = "it leaves the yaml's folder" if not lies_inside(cand, base) else "no such folder"
    return DatasetRoot(
        base,
        [
            f"{yaml_path.name}: `path: {text}` is ignored ({reason}; a relative path may only name a folder inside "
            f"the yaml's folder, use an absolute one to read from elsewhere); the dataset is read from {base}."
        ],
    )


@dataclass
class SplitPath:
    """One resolved split path: ``path`` lies inside the root; ``export`` marks the ``../`` convention."""

    entry: str
    path: Path
    export: bool = False


def _without_leading_parents(entry: str) -> str | None:
    parts = Path(os.path.normpath(entry)).parts
    k = 0
    while k < len(parts) and parts[k] == "..":
        k += 1
    return str(Path(*parts[k:])) if 0 < k < len(parts) else None


def resolve_split_path(entry: str, root: Path, where: str, *, also_relative_to: Path | None = None) -> SplitPath:
    """Resolve a path a yaml (or a ``.txt`` split list) names, by the rule in the module docstring.

    Args:
        entry: the path as written.
        root: the dataset root (:func:`dataset_root`).
        where: ``file[:line]: <split> path`` prefix for messages.
        also_relative_to: a second base tried after the root (a list file's folder).

    Returns:
        The first candidate inside the root that exists; else the export
        reading if it exists; else the first candidate inside the root (the
        caller reports it missing).

    Raises:
        DataError: every reading of ``entry`` leaves the root.
    """
    root = lexical(root)
    given = Path(entry).expanduser()
    if given.is_absolute():
        candidates = [lexical(given)]
    else:
        candidates = [lexical(root / given)] + ([lexical(also_relative_to / given)] if also_relative_to else [])
    inside = [c for c in candidates if lies_inside(c, root)]
    for c in inside:
        if c.exists():
            return SplitPath(entry, c)
    stripped = None if given.is_absolute() else _without_leading_parents(entry)
    if stripped is not None and (root / stripped).exists():
        return SplitPath(entry, lexical(root / stripped), export=True)
    if inside:
        return SplitPath(entry, inside[0])
    tried = f" (nor does {lexical(root / stripped)} exist, the export reading)" if stripped else ""
    raise DataError(
        f"{where} {entry!r} escapes the dataset root {root}{tried}.",
        why="a dataset yaml may only name files inside its root (symlinks inside it are fine); a path leading "
        "out of it would silently read data you did not point at.",
        fix="Put (or symlink) the data under the root and name it relative to the root, or set an absolute "
        "`path:` to the folder that holds the splits.",
    )
