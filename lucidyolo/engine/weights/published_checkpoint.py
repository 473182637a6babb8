"""Read the publisher's YOLO26 checkpoints (``yolo26n.pt``, ``yolo26n-seg.pt``, ...) without running them.

Those files are torch zip archives whose ``<prefix>/data.pkl`` pickles whole model objects of
the publisher's package (``ultralytics.nn.tasks.DetectionModel`` holding ``torch.nn`` and
``ultralytics.nn.modules`` layers). Unpickling them the ordinary way imports that package and
calls whatever the pickle names, so torch's weights-only loader refuses them and lucid never
imports that package. This module reads them with its own unpickler instead:

* every class of the publisher's package or of ``torch.nn.modules`` becomes an inert record
  (:class:`PickledRecord`): it takes any constructor arguments and keeps the pickled
  ``__setstate__`` state as a dict; it has no behaviour, and nothing is imported;
* tensors are rebuilt by our own functions from the raw bytes of ``<prefix>/data/<key>``
  (bounds checked), never through torch's deserialisers;
* containers (``OrderedDict``, ``set``, ``frozenset``, ``torch.Size`` as a tuple) are the only
  other globals allowed; anything else (``os.system``, ``builtins.eval``, ...) is refused while
  parsing, before it could be called, and the whole file is refused.

The state dict is then walked out of the records exactly as ``nn.Module.state_dict`` names it
(each module's parameters, then its persistent buffers, then its children, dotted).
"""

from __future__ import annotations

import io
import pickle
import sys
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from lucidyolo.engine.weights.pickle_scan import scan_pickle
from lucidyolo.errors import UserError

PUBLISHER_PACKAGE = "ultralytics"
"""Top-level package of the publisher's model classes: records stand in for them, it is never imported."""

_RECORD_MODULE_PREFIXES = (f"{PUBLISHER_PACKAGE}.", "torch.nn.modules.")

_STORAGE_DTYPES: dict[str, torch.dtype] = {
    "HalfStorage": torch.float16,
    "FloatStorage": torch.float32,
    "DoubleStorage": torch.float64,
    "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
}

_MAX_MODULE_DEPTH = 64
"""Deeper module nesting than any real model (YOLO26 nests 8 levels): a crafted file, refused."""


@dataclass
class PublishedCheckpoint:
    """What lucid takes from a publisher checkpoint: its tensors and the facts needed to use them.

    Attributes:
        path: the file read.
        model_class: class name of the model record (``DetectionModel``, ``SegmentationModel``,
            ``OBBModel``, ``PoseModel``: what the file says).
        head_class: class name of the last top-level module (``model.model[-1]``, e.g.
            ``Detect``, ``Segment26``, ``OBB26``, ``Pose26``).
        state: every parameter and persistent buffer, named as the publisher's state dict
            names them (``model.0.conv.weight`` (16, 3, 3, 3), ``model.0.bn.num_batches_tracked``
            ()), in its order; floating tensors are float32 (the files store float16), all are
            contiguous, on the CPU and own their memory.
        class_names: the model's ``names`` (index -> name), in index order.
        img_size: training image size (``imgsz`` of the training arguments), None if absent.
        keypoint_shape: ``(K, dims)`` from the head record's ``kpt_shape`` (pose files), else None.
        used_ema: the state came from the ``'ema'`` entry (set in a training-state file);
            False: from ``'model'`` (release files, the reference ones included, hold the EMA
            weights there in float16 and set ``'ema'`` to None).
        info: the plain top-level values (``date``, ``version``, ``license``, ``epoch``, ...;
            only str / int / float / bool / None).
    """

    path: Path
    model_class: str
    head_class: str
    state: dict[str, Tensor]
    class_names: list[str]
    img_size: int | None
    keypoint_shape: tuple[int, int] | None
    used_ema: bool
    info: dict[str, Any] = field(default_factory=dict)


class PickledRecord:
    """An inert stand-in for a pickled object of a class lucid must not import.

    The unpickler makes one subclass per ``(module, name)`` the file names (:attr:`origin`
    says which); building one never runs code of that class. ``args`` keeps the constructor
    arguments (NEWOBJ / REDUCE), ``state`` the dict ``__setstate__`` received (for an
    ``nn.Module``: ``_parameters``, ``_buffers``, ``_modules``, its attributes), and ``extra``
    any state that was not a dict.
    """

    __slots__ = ("args", "extra", "state")
    origin: ClassVar[str] = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> PickledRecord:
        record = super().__new__(cls)
        record.args = args
        record.state = {}
        record.extra = None
        return record

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # __new__ kept the arguments; a record does nothing else

    def __setstate__(self, state: Any) -> None:
        # (dict, slots-dict) is how pickle passes the state of a class with __slots__
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
        for part in parts:
            if isinstance(part, dict):
                self.state.update((k, v) for k, v in part.items() if isinstance(k, str))
            elif part is not None:
                self.extra = part

    @property
    def class_name(self) -> str:
        """The pickled class's name (``Conv``), without its module."""
        return self.origin.rsplit(".", 1)[-1]

    def __repr__(self) -> str:
        return f"<record of {self.origin}>"


class _RefusedGlobal(pickle.UnpicklingError):
    """The pickle names a global outside the allowlist; raised before it could be called."""

    def __init__(self, module: str, name: str) -> None:
        self.global_name = f"{module}.{name}"
        super().__init__(f"refused global '{self.global_name}'")


class _Malformed(pickle.UnpicklingError):
    """The pickle or its storages do not describe valid tensors (corrupt or crafted)."""


@dataclass(frozen=True)
class _StorageType:
    """What a ``torch.HalfStorage``-style global stands for here: only its element type."""

    name: str
    dtype: torch.dtype


@dataclass(frozen=True)
class _FlatStorage:
    """One ``data/<key>`` entry read as a flat tensor of its storage dtype, shape (numel,)."""

    key: str
    flat: Tensor


def _rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> Tensor:
    """Our replacement for ``torch._utils._rebuild_tensor_v2``: a view of one flat storage.

    The view must lie inside the storage: offset + sum((size_i - 1) * stride_i) < numel (for a
    non-empty view), all ints non-negative; ``as_strided`` is never asked to read past the end.
    ``requires_grad``, hooks and metadata are ignored (a state dict needs none of them).
    """
    if not isinstance(storage, _FlatStorage):
        raise _Malformed(f"a tensor record points at {type(storage).__name__}, not at a storage")
    shape, strides = _int_tuple(size, "size"), _int_tuple(stride, "stride")
    if type(storage_offset) is not int or storage_offset < 0 or len(shape) != len(strides):
        raise _Malformed(f"bad tensor record (offset {storage_offset!r}, size {shape}, stride {strides})")
    numel = storage.flat.numel()
    if 0 not in shape:
        last = storage_offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
        if last >= numel:
            raise _Malformed(f"a tensor view (offset {storage_offset}, size {shape}, stride {strides}) "
                             f"reaches past the end of storage data/{storage.key} ({numel} elements)")
    return storage.flat.as_strided(shape, strides, storage_offset)


def _rebuild_parameter(data: Any, requires_grad: Any = False, backward_hooks: Any = None,
                       state: Any = None) -> Tensor:
    """Our replacement for ``torch._utils._rebuild_parameter`` (and ``_with_state``): the plain tensor."""
    if not isinstance(data, Tensor):
        raise _Malformed(f"a parameter record holds {type(data).__name__}, not a tensor")
    return data


def _size(dims: Any = ()) -> tuple[int, ...]:
    """``torch.Size(dims)`` as a plain tuple of non-negative ints."""
    return _int_tuple(dims, "torch.Size")


def _int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list) or not all(type(v) is int and v >= 0 for v in value):
        raise _Malformed(f"bad {what} {value!r}")
    return tuple(value)


_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch", "Size"): _size,
    ("collections", "OrderedDict"): OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
}
"""Every callable a file may reach besides the records: each only builds data from data."""


class _PublishedUnpickler(pickle.Unpickler):
    """Unpickles ``data.pkl`` into records, tensors and containers; refuses every other global."""

    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str) -> None:
        super().__init__(io.BytesIO(data))
        self._archive = archive
        self._prefix = prefix
        self._records: dict[tuple[str, str], type[PickledRecord]] = {}
        self._storages: dict[str, _FlatStorage] = {}

    def find_class(self, module: str, name: str) -> Any:
        safe = _SAFE_GLOBALS.get((module, name))
        if safe is not None:
            return safe
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name, _STORAGE_DTYPES[name])
        if module.startswith(_RECORD_MODULE_PREFIXES) and name.isidentifier():
            return self._record_class(module, name)
        raise _RefusedGlobal(module, name)

    def _record_class(self, module: str, name: str) -> type[PickledRecord]:
        # one class per (module, name): the records of one pickled class share a type, as the
        # originals did; they are built here with type(), nothing named by the file is imported
        key = (module, name)
        if key not in self._records:
            self._records[key] = type(name, (PickledRecord,), {"__slots__": (), "origin": f"{module}.{name}"})
        return self._records[key]

    def persistent_load(self, pid: Any) -> _FlatStorage:
        # torch writes ('storage', storage type, key, location, numel); the location is ignored:
        # everything is read onto the CPU
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise _Malformed(f"unknown persistent id {str(pid)[:80]!r}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or type(numel) is not int:
            raise _Malformed(f"bad storage record {str(pid)[:80]!r}")
        if key in self._storages:
            return self._storages[key]
        entry = f"{self._prefix}/data/{key}"
        try:
            info = self._archive.getinfo(entry)
        except KeyError:
            raise _Malformed(f"the archive has no storage {entry}") from None
        itemsize = torch.empty((), dtype=storage_type.dtype).element_size()
        expected = numel * itemsize
        if numel < 0 or info.file_size != expected:
            raise _Malformed(f"storage {entry} holds {info.file_size} bytes, its record says {numel} "
                             f"x {itemsize} = {expected} ({storage_type.name})")
        raw = bytearray(self._archive.read(entry))
        if len(raw) != expected:
            raise _Malformed(f"storage {entry} holds {len(raw)} bytes, expected {expected}")
        flat = torch.frombuffer(raw, dtype=storage_type.dtype) if numel else torch.empty(0, dtype=storage_type.dtype)
        self._storages[key] = _FlatStorage(key, flat)
        return self._storages[key]


def is_published_checkpoint(path: str | Path) -> bool:
    """True when ``path`` is a torch zip whose pickle names a class of the publisher's package.

    Cheap and safe: reads ``data.pkl``'s opcodes (:func:`~lucidyolo.engine.weights.pickle_scan.scan_pickle`),
    unpickles nothing. A poisoned publisher-format file also answers True; reading it is what
    refuses it. Missing, unreadable or non-zip files answer False.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            entry = _pickle_entry(archive)
            if entry is None:
                return False
            data = archive.read(entry)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False
    return any(_in_publisher_package(module) for module, _ in scan_pickle(data).globals)


def read_published_checkpoint(path: str | Path) -> PublishedCheckpoint:
    """Read a publisher checkpoint's tensors and facts; nothing in the file is executed.

    Args:
        path: a ``.pt`` file in the publisher's release format.

    Returns:
        The :class:`PublishedCheckpoint` (state from ``'ema'`` when set, else ``'model'``).

    Raises:
        UserError: the file is missing; is not a (complete) torch zip (no ``data.pkl``, a
            missing or short ``data/<key>`` storage, a truncated pickle); names a global outside
            the allowlist (refused while parsing: nothing was loaded or run); or holds no
            model record or no tensors.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"Checkpoint not found: '{p}'.", why="the path does not exist.",
                        fix="check the path of the .pt file (e.g. yolo26n.pt).")
    if not p.is_file():
        raise UserError(f"Checkpoint path is not a file: '{p}'.", fix="pass the .pt file itself (e.g. yolo26n.pt).")
    try:
        with zipfile.ZipFile(p) as archive:
            entry = _pickle_entry(archive)
            if entry is None:
                raise _Malformed("the archive has no <folder>/data.pkl")
            prefix = entry.rsplit("/", 1)[0]
            _check_byte_order(archive, prefix)
            top = _PublishedUnpickler(archive.read(entry), archive, prefix).load()
    except _RefusedGlobal as exc:
        raise UserError(
            f"Refused checkpoint '{p}'.",
            why=(f"its pickle names the global '{exc.global_name}', which is not part of a model checkpoint, "
                 "and unpickling it could run arbitrary code; it was refused while parsing, so nothing "
                 "in the file was loaded or run."),
            fix="only load checkpoints you trust; download the weights again from their publisher.",
        ) from None
    except (pickle.UnpicklingError, zipfile.BadZipFile, OSError, EOFError, ValueError, TypeError, KeyError,
            IndexError, AttributeError, RuntimeError, RecursionError, OverflowError) as exc:
        raise _cannot_read(p, exc) from None
    if not isinstance(top, dict):
        raise UserError(
            f"'{p}' is a torch file but not a checkpoint (it holds a {type(top).__name__}, not a dict).",
            fix="pass a checkpoint file of the publisher (yolo26n.pt, yolo26n-seg.pt, ...).",
        )
    used_ema = top.get("ema") is not None
    model = top.get("ema") if used_ema else top.get("model")
    if not isinstance(model, PickledRecord):
        held = "are empty (None)" if model is None else f"hold a {type(model).__name__}, not a pickled model"
        raise UserError(
            f"'{p}' holds no model: its 'ema' and 'model' entries {held}.",
            why=f"the checkpoint's keys are {sorted(str(k) for k in top)[:12]}; the weights live in 'ema' or 'model'.",
            fix="pass a checkpoint with weights (a training-state file without a model cannot be used).",
        )
    try:
        state = _state_dict(model)
    except _Malformed as exc:
        raise _cannot_read(p, exc) from None
    if not state:
        raise UserError(
            f"'{p}' holds a {model.class_name} with no tensors.",
            why="its model record has no parameters or buffers to read.",
            fix="pass a checkpoint with trained weights.",
        )
    head = _last_top_level_module(model)
    return PublishedCheckpoint(
        path=p,
        model_class=model.class_name,
        head_class=head.class_name if head is not None else "",
        state=state,
        class_names=_class_names(model.state.get("names")),
        img_size=_img_size(top, model),
        keypoint_shape=_keypoint_shape(head, model),
        used_ema=used_ema,
        info={str(k): v for k, v in top.items() if type(v) in (str, int, float, bool, type(None))},
    )


def _in_publisher_package(module: str) -> bool:
    return module == PUBLISHER_PACKAGE or module.startswith(f"{PUBLISHER_PACKAGE}.")


def _pickle_entry(archive: zipfile.ZipFile) -> str | None:
    """``<prefix>/data.pkl``: torch puts every record of a checkpoint under one top folder."""
    return next((n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")), None)


def _check_byte_order(archive: zipfile.ZipFile, prefix: str) -> None:
    # files without the record predate it and are little-endian
    try:
        order = archive.read(f"{prefix}/byteorder").decode("ascii", "replace").strip()
    except KeyError:
        order = "little"
    if order != sys.byteorder:
        raise _Malformed(f"its tensors are stored {order}-endian, this machine is {sys.byteorder}-endian")


def _state_dict(model: PickledRecord) -> dict[str, Tensor]:
    """``model.state_dict()`` of the records: float32 copies, every other dtype kept."""
    out: dict[str, Tensor] = {}

    def walk(record: PickledRecord, prefix: str, ancestors: tuple[int, ...]) -> None:
        if id(record) in ancestors or len(ancestors) > _MAX_MODULE_DEPTH:
            raise _Malformed(f"the module tree loops or nests too deep at '{prefix or 'model'}'")
        st = record.state
        skip = st.get("_non_persistent_buffers_set") or set()
        if not isinstance(skip, set | frozenset):
            raise _Malformed(f"'{prefix}_non_persistent_buffers_set' is a {type(skip).__name__}, not a set")
        for kind in ("_parameters", "_buffers"):
            for name, tensor in _mapping(st.get(kind), f"{prefix}{kind}").items():
                if tensor is None or (kind == "_buffers" and name in skip):
                    continue
                if not isinstance(tensor, Tensor):
                    raise _Malformed(f"'{prefix}{name}' holds {type(tensor).__name__}, not a tensor")
                out[f"{prefix}{name}"] = _own_copy(tensor)
        for name, child in _mapping(st.get("_modules"), f"{prefix}_modules").items():
            if child is None:
                continue
            if not isinstance(child, PickledRecord):
                raise _Malformed(f"module '{prefix}{name}' is a {type(child).__name__}, not a module record")
            walk(child, f"{prefix}{name}.", (*ancestors, id(record)))

    walk(model, "", ())
    return out


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _Malformed(f"'{where}' is not a dict of names")
    return value


def _own_copy(tensor: Tensor) -> Tensor:
    # a fresh contiguous tensor: float16/bfloat16 widened to float32 for lucid's modules, and
    # no view keeps a whole shared storage (the file's bytes) alive
    dtype = torch.float32 if tensor.is_floating_point() else tensor.dtype
    out = torch.empty(tuple(tensor.shape), dtype=dtype)
    out.copy_(tensor)
    return out


def _last_top_level_module(model: PickledRecord) -> PickledRecord | None:
    """``model.model[-1]`` (the head); the model's own last child when it has no ``model`` list."""
    children = model.state.get("_modules") or {}
    layers = children.get("model") if isinstance(children, dict) else None
    holder = layers if isinstance(layers, PickledRecord) else model
    modules = holder.state.get("_modules") or {}
    last = list(modules.values())[-1] if isinstance(modules, dict) and modules else None
    return last if isinstance(last, PickledRecord) else None


def _class_names(names: Any) -> list[str]:
    """``names`` as a list: a dict index -> name (sorted by index) or a list."""
    if isinstance(names, dict):
        items = sorted(((k, v) for k, v in names.items() if type(k) is int), key=lambda kv: kv[0])
        return [str(v) for _, v in items]
    if isinstance(names, list | tuple):
        return [str(v) for v in names]
    return []


def _img_size(top: dict[Any, Any], model: PickledRecord) -> int | None:
    """``imgsz`` of the training arguments (``train_args``, else the model's ``args``).

    A ``[h, w]`` pair gives its larger side: lucid trains square images of that size.
    """
    for args in (top.get("train_args"), model.state.get("args")):
        value = args.get("imgsz") if isinstance(args, dict) else None
        if type(value) is int and value > 0:
            return value
        if isinstance(value, list | tuple) and value and all(type(v) is int and v > 0 for v in value):
            return max(value)
    return None


def _keypoint_shape(head: PickledRecord | None, model: PickledRecord) -> tuple[int, int] | None:
    """``kpt_shape`` (K, dims) of the head record, else of the model record or its config (``yaml``)."""
    config = model.state.get("yaml")
    for value in (head.state.get("kpt_shape") if head is not None else None, model.state.get("kpt_shape"),
                  config.get("kpt_shape") if isinstance(config, dict) else None):
        if isinstance(value, list | tuple) and len(value) == 2 and all(type(v) is int and v > 0 for v in value):
            return (value[0], value[1])
    return None


def _cannot_read(p: Path, exc: BaseException) -> UserError:
    detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    if isinstance(exc, EOFError):
        detail = "its pickle (data.pkl) ends early"
    elif isinstance(exc, zipfile.BadZipFile):
        detail = f"not a zip archive ({detail})" if detail else "not a zip archive"
    return UserError(
        f"Cannot read checkpoint '{p}'.",
        why=f"it is not a (complete) checkpoint in the publisher's format: {detail or type(exc).__name__}.",
        fix="download or copy the file again (a truncated file cannot be read); only load files you trust.",
    )

