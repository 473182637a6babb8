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
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lucidyolo.atomic_write import atomic_open
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


@dataclass(frozen=True)
class PickleScan:
    """What a pickle references, read from its opcodes alone (nothing is unpickled).

    Attributes:
        globals: ``(module, name)`` of every GLOBAL / STACK_GLOBAL opcode, in stream order.
        strings: every string constant the stream pushes.
        complete: the scan reached STOP; False for a truncated or garbled stream (what was
            seen before the damage is still listed).
    """

    globals: tuple[tuple[str, str], ...]
    strings: frozenset[str]
    complete: bool


_STRING_OPS = frozenset({"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
                         "SHORT_BINUNICODE", "BINUNICODE8"})
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def scan_pickle(data: bytes) -> PickleScan:
    """List the globals and strings of a pickle stream without executing it (:mod:`pickletools`).

    GLOBAL (protocols 0-3) names its class inline. STACK_GLOBAL (protocol 4+) pops the module
    and name strings the two preceding pushes left; a pickler writes a string once and then
    refers to it through the memo (``BINGET`` after ``BINPUT`` / ``MEMOIZE``), so the memo's
    strings are tracked too. Only a pickler's own output is resolved exactly: a crafted
    stream can hide a STACK_GLOBAL's name from this scan (it is then skipped), which is
    why this is a classifier, never a safety check: the unpickler's ``find_class`` decides.
    """
    import pickletools

    found: list[tuple[str, str]] = []
    strings: set[str] = set()
    memo: dict[int, str | None] = {}
    recent: list[str | None] = [None, None]  # the last two values pushed, None when not a string
    complete = False
    try:
        for op, arg, _ in pickletools.genops(data):
            name = op.name
            if name in _STRING_OPS:
                text = arg.decode("latin-1") if isinstance(arg, bytes) else str(arg)
                strings.add(text)
                recent = [recent[-1], text]
            elif name in _MEMO_GETS:
                recent = [recent[-1], memo.get(int(arg))]
            elif name in _MEMO_PUTS:
                memo[int(arg)] = recent[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1]
            elif name == "GLOBAL" and isinstance(arg, str):
                module, _, qualname = arg.partition(" ")
                found.append((module, qualname))
                recent = [recent[-1], None]
            elif name == "STACK_GLOBAL":
                module_name, qualname = recent
                if module_name is not None and qualname is not None:
                    found.append((module_name, qualname))
                recent = [None, None]
            elif name == "STOP":
                complete = True
            elif name not in ("FRAME", "PROTO"):
                recent = [recent[-1], None]
    except (ValueError, pickle.UnpicklingError):
        pass
    return PickleScan(globals=tuple(found), strings=frozenset(strings), complete=complete)


def _refuse_poisoned_published(p: Path) -> None:
    """Raise the publisher-format reader's refusal when ``p`` is such a file and does not read.

    The opcode scan that names the foreign model class cannot tell a genuine publisher file
    from one that also calls ``os.system``; the reader's unpickler refuses any global outside
    its allowlist while parsing (nothing runs), so its error is the accurate one.
    """
    from lucidyolo.engine.published_checkpoint import (
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
