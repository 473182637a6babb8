"""Checkpoint IO: the one safe loader every command uses, and atomic saving.

Loading: ``torch.load(..., weights_only=True)`` parses the pickle with torch's
restricted unpickler, which refuses any global outside its allowlist *while
parsing*, i.e. before a crafted ``__reduce__`` could run. Only a file that
passes that parse is returned (and may then be handed to Lightning). A refusal
becomes a :class:`~lucidyolo.errors.UserError`, never a traceback.

Saving: a checkpoint is written to a temporary file in the destination folder,
flushed and fsync'ed, then renamed over the target with ``os.replace`` (atomic
on POSIX and Windows within one filesystem), and the folder is fsync'ed so the
rename survives a power cut. A crash at any point leaves either the previous
file or the new one, never a truncated ``last.ckpt``.

Our own checkpoints must pass the safe loader, so hyper-parameters and
callback state are kept in plain types; :func:`assert_plain` checks that.
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

from lucidyolo.atomic_write import atomic_open
from lucidyolo.engine.weights.pickle_scan import scan_pickle
from lucidyolo.errors import UserError

PLAIN_TYPES: tuple[type, ...] = (str, int, float, bool, type(None), torch.Tensor)
"""Leaf types allowed by :func:`assert_plain` (containers: dict, list, tuple)."""


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint safely onto the CPU.

    Args:
        path: checkpoint file (``.ckpt`` / ``.pt``).

    Returns:
        The checkpoint dict (tensors on CPU).

    Raises:
        UserError: the file is missing, is not a torch checkpoint, is
            truncated, is not a dict, or contains pickled objects outside
            torch's ``weights_only`` allowlist (refused before anything in it
            runs).
    """
    p = Path(path)
    if not p.exists():
        raise UserError(
            f"Checkpoint not found: '{p}'.",
            why="the path does not exist.",
            fix="check the path (runs keep theirs in runs/<task>/version_N/checkpoints/).",
        )
    if not p.is_file():
        raise UserError(
            f"Checkpoint path is not a file: '{p}'.",
            fix="pass the .ckpt file itself, e.g. .../checkpoints/last.ckpt.",
        )
    try:
        with warnings.catch_warnings():
            # a raw (non-zip) pickle of protocol > 2 makes torch warn with its own site-packages path before
            # the refusal below says what the file is: the user gets the refusal only
            warnings.filterwarnings("ignore", message=r"Detected pickle protocol \d+ in the checkpoint", category=UserWarning)
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        reason = _refusal_reason(exc)
        foreign = foreign_model_class(p)
        if foreign is not None:
            _refuse_poisoned_published(p)
            raise UserError(
                f"'{p}' is a checkpoint of another training program, not of lucid: it stores a whole pickled "
                f"model object ({foreign}) under 'model'.",
                why=("lucid reads only its own checkpoints and weights files, which hold tensors and plain values; "
                     "loading a pickled model object would mean running that program's code, so nothing in the "
                     "file was loaded or run."),
                fix=("train with lucid, or start from a lucid checkpoint or a `lucid export --format weights` file; "
                     "lucid cannot load this file."),
            ) from None
        if "global" in reason.lower():
            raise UserError(
                f"Refused checkpoint '{p}'.",
                why=(
                    "it contains pickled objects outside torch's weights-only allowlist, "
                    f"and unpickling those could run arbitrary code ({reason})."
                ),
                fix=(
                    "only load checkpoints you trust; re-save it with plain types "
                    "(dicts, lists, str, numbers, tensors) in hyper-parameters and state."
                ),
            ) from None
        raise UserError(
            f"Cannot read checkpoint '{p}'.",
            why=(
                "it is not a (complete) torch checkpoint, or it uses pickle features outside "
                f"the safe subset torch's weights-only loader accepts ({reason})."
            ),
            fix="pass a checkpoint written by `lucid fit`; only load files you trust.",
        ) from None
    except (RuntimeError, EOFError, KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
        # garbage -> KeyError/UnpicklingError, truncated zip -> RuntimeError, empty -> EOFError
        raise _not_a_checkpoint(p, exc) from None
    if not isinstance(obj, dict):
        raise UserError(
            f"'{p}' is a torch file but not a checkpoint (it holds a {type(obj).__name__}, "
            "not a dict).",
            fix="pass a checkpoint written by `lucid fit` (last.ckpt / best.ckpt).",
        )
    return obj


_PLAIN_PACKAGES = frozenset({"torch", "numpy", "collections", "__builtin__", "_codecs", "copyreg"})


def foreign_model_class(path: Path) -> str | None:
    """The class of a whole pickled model stored under ``'model'`` (another trainer's checkpoint), or None.

    Reads the pickle's opcodes without executing any of them (:func:`scan_pickle`): the file
    references a class of a third-party package (not the standard library, torch or numpy)
    and holds the key ``'model'``. A crafted file that calls a standard-library function
    (``os.system``) is not described as a checkpoint.
    """
    import sys

    try:
        with zipfile.ZipFile(path) as archive:
            name = next((n for n in archive.namelist() if n.endswith("data.pkl")), None)
            if name is None:
                return None
            data = archive.read(name)
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    scan = scan_pickle(data)
    if not scan.complete:
        return None
    classes = [f"{module}.{qualname}" for module, qualname in scan.globals]
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    third_party = [c for c in classes if c.split(".")[0] not in stdlib and c.split(".")[0] not in _PLAIN_PACKAGES]
    return third_party[0] if "model" in scan.strings and third_party else None


def _refuse_poisoned_published(p: Path) -> None:
    """Raise the publisher-format reader's refusal when ``p`` is such a file and does not read.

    The opcode scan that names the foreign model class cannot tell a genuine publisher file
    from one that also calls ``os.system``; the reader's unpickler refuses any global outside
    its allowlist while parsing (nothing runs), so its error is the accurate one.
    """
    from lucidyolo.engine.weights.published_checkpoint import (
        is_published_checkpoint,
        read_published_checkpoint,
    )

    if is_published_checkpoint(p):
        read_published_checkpoint(p)


def _refusal_reason(exc: BaseException) -> str:
    # torch's message is a paragraph of generic advice around one line that names the
    # refused global (wording varies by torch version and by why it was refused)
    text = str(exc)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    named = [
        ln
        for ln in lines
        if "global" in ln.lower() and "weights only load failed" not in ln.lower()
    ]
    pick = named or lines[:1]
    return pick[0].split(" was not", 1)[0].rstrip(".")[:200] if pick else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0].split(". ", 1)[0][:200] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _not_a_checkpoint(p: Path, exc: BaseException) -> UserError:
    return UserError(
        f"Cannot read checkpoint '{p}'.",
        why=f"it is not a (complete) torch checkpoint: {_first_line(exc)}.",
        fix="pass a checkpoint written by `lucid fit`; a truncated file must be re-copied.",
    )


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` that never leaves a partial file at ``path``.

    Args:
        obj: anything ``torch.save`` accepts (keep it plain: see
            :func:`assert_plain`).
        path: destination; its folder is created if needed.

    Returns:
        The path written.

    Raises:
        Whatever ``torch.save`` raises; the previous file at ``path`` (if any)
        is left untouched and the temporary file is removed.
    """
    path = Path(path)
    # Serialised in memory first: a write fault then reaches the caller as the plain OSError of one
    # write (errno, path), not wrapped in torch's zip-writer errors.
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_open(path, "wb") as f:
        f.write(buffer.getbuffer())
    return path


def assert_plain(obj: Any, name: str = "obj") -> None:
    """Check that a nested structure holds only plain, safely loadable types.

    Containers: ``dict`` and ``OrderedDict`` (what ``state_dict()`` returns;
    torch's allowlist has it) with ``str`` / ``int`` keys, ``list``, ``tuple``.
    Leaves: ``str``, ``int``, ``float``, ``bool``, ``None``, ``torch.Tensor``.
    Other subclasses (e.g. a ``defaultdict``, a ``namedtuple`` or a pydantic model)
    are refused: they pickle by class reference and fail the safe loader.

    Args:
        obj: the structure (hyper-parameters, callback state).
        name: how to name the root in the error message.

    Raises:
        TypeError: naming the first offending element's path and type, e.g.
            ``hparams['model']['act']: Swish``.
    """
    stack: list[tuple[str, Any]] = [(name, obj)]
    while stack:
        where, value = stack.pop()
        kind = type(value)
        if kind is dict or kind is OrderedDict:  # OrderedDict: state_dicts, allowlisted by torch
            for key, item in value.items():
                if type(key) not in (str, int):
                    raise TypeError(f"{where}: key {key!r} has type {type(key).__name__}")
                stack.append((f"{where}[{key!r}]", item))
        elif kind in (list, tuple):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif kind in PLAIN_TYPES or kind is torch.nn.Parameter:
            continue
        else:
            raise TypeError(
                f"{where}: {kind.__module__}.{kind.__qualname__} is not a plain type "
                "(dict, list, tuple, str, int, float, bool, None, torch.Tensor)"
            )
