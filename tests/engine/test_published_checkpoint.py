"""The publisher-format reader: real reference files, hand-made files, poisoned and corrupt ones.

The hand-made files are written by ``torch.save`` itself (so zip layout, storages and the
pickle's tensor records are exactly torch's), with a pickler that names stand-in classes as
the publisher's (``ultralytics.nn.tasks DetectionModel``) without importing anything: the
publisher's package is never installed or imported here.
"""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import types
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from lucidyolo.engine.weights.checkpoint import load_checkpoint, scan_pickle
from lucidyolo.engine.weights.published_checkpoint import (
    PublishedCheckpoint,
    is_published_checkpoint,
    read_published_checkpoint,
)
from lucidyolo.errors import UserError
from tests.conftest import REPO

REFERENCE = REPO.parent / "shared" / "reference"
"""The publisher's files and facts beside the repo (like ``../shared/data``)."""

TASKS = ("det", "seg", "obb", "keypoints")


# ---------------------------------------------------------------- writing the publisher's format


class _PublisherPickler(pickle._Pickler):  # the pure-Python pickler: its save_global can be overridden
    """Writes classes whose ``__module__`` is the publisher's as GLOBAL / STACK_GLOBAL, unchecked.

    The standard pickler imports a class's module to check it; the stand-ins below only claim
    to live there. Everything else (torch.nn layers, os.system, ...) is written as usual.
    """

    def save_global(self, obj: Any, name: str | None = None) -> None:
        module = getattr(obj, "__module__", None) or ""
        if not module.startswith("ultralytics."):
            super().save_global(obj, name)
            return
        qualname = name or obj.__qualname__
        if self.proto >= 4:
            self.save(module)
            self.save(qualname)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + f"{module}\n{qualname}\n".encode())
        self.memoize(obj)


_PICKLE_MODULE = types.SimpleNamespace(Pickler=_PublisherPickler, __name__="publisher_format")

_CONV_MODULE = "ultralytics.nn.modules.conv"  # one string object: a protocol-4 pickle memoizes it once


def _publisher_class(module: str, name: str) -> type[nn.Module]:
    return type(name, (nn.Module,), {"__module__": module, "__qualname__": name})


Conv = _publisher_class(_CONV_MODULE, "Conv")
Concat = _publisher_class(_CONV_MODULE, "Concat")
Detect = _publisher_class("ultralytics.nn.modules.head", "Detect")
DetectionModel = _publisher_class("ultralytics.nn.tasks", "DetectionModel")


class SystemPayload:
    """Unpickling this runs ``os.system`` (a crafted reducer): it creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


class EvalPayload:
    """Same attack through ``builtins.eval``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (eval, (f"open({str(self.marker)!r}, 'w').close()",))


def tiny_publisher_model() -> nn.Module:
    """A 2-layer stand-in of the publisher's DetectionModel: Conv(conv, bn, act) -> Concat -> Detect."""
    conv = Conv()
    conv.conv = nn.Conv2d(3, 4, 3, bias=False)
    conv.bn = nn.BatchNorm2d(4)
    conv.act = nn.SiLU()
    head = Detect()
    head.cv2 = nn.ModuleList([nn.Sequential(nn.Conv2d(4, 4, 1))])
    head.register_buffer("grid", torch.zeros(2), persistent=False)  # not in the state dict
    # a view into another tensor's storage, at an offset: storage sharing and offsets read right
    head.register_buffer("window", head.cv2[0][0].weight.data.view(-1)[3:7])
    head.kpt_shape = [5, 3]
    head.stride = torch.tensor([8.0])  # a plain tensor attribute: not a parameter or buffer
    model = DetectionModel()
    model.model = nn.Sequential(conv, Concat(), head)
    model.names = {1: "square", 0: "circle"}
    model.args = {"imgsz": 64, "task": "detect"}
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-1, 1, p.numel()).view_as(p) * (i + 1))
        conv.bn.running_mean.fill_(0.25)
    conv.bn.num_batches_tracked.fill_(7)
    return model.eval()


def write_publisher_file(path: Path, model: nn.Module | None = None, protocol: int = 2,
                         **extra: Any) -> Path:
    """A checkpoint laid out like the publisher's release files (model in float16, ``ema`` None).

    ``extra`` entries go first in the top-level dict (a poison there runs before any model
    record would be built by an ordinary unpickler).
    """
    top: dict[str, Any] = dict(extra)
    top.update({"date": "2026-01-01T00:00:00", "version": "8.4.0", "license": "AGPL-3.0", "epoch": -1,
                "best_fitness": None, "model": None if model is None else model.half(), "ema": None,
                "optimizer": None, "train_args": {"imgsz": 96, "batch": 8}, "git": {"branch": None}})
    torch.save(top, path, pickle_module=_PICKLE_MODULE, pickle_protocol=protocol)
    return path


def _expected_state() -> dict[str, torch.Tensor]:
    state = tiny_publisher_model().half().state_dict()
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def _pickle_bytes(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))


# ---------------------------------------------------------------- the reference files


@pytest.mark.realdata
@pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"the publisher's reference files ({REFERENCE}) are absent")
def test_reference_checkpoints_read_with_the_publishers_tensor_names():
    layouts = json.loads((REFERENCE / "yolo26-layouts.json").read_text())
    for task in TASKS:
        path = REFERENCE / task / f"yolo26n-{task}.pt"
        assert is_published_checkpoint(path), task
        ckpt = read_published_checkpoint(path)
        layout = {name: tuple(shape) for name, shape, _ in layouts[f"{task}/n"]["tensors"]}
        assert list(ckpt.state) == list(layout), task  # same names, same order
        # the layout has 80 classes, the files 3: only the head (model.23) has class-sized tensors
        assert all(tuple(t.shape) == layout[k] for k, t in ckpt.state.items() if not k.startswith("model.23.")), task
        for name, tensor in ckpt.state.items():
            want = torch.int64 if name.endswith("num_batches_tracked") else torch.float32
            assert tensor.dtype == want and tensor.is_contiguous() and tensor.device.type == "cpu", name
        assert torch.cat([t.flatten().float() for t in ckpt.state.values()]).isfinite().all(), task
        assert ckpt.class_names and ckpt.img_size == 320, task
        # release files keep the (EMA) weights under 'model' and set 'ema' to None
        assert ckpt.used_ema is False and ckpt.info["ema"] is None, task
        assert ckpt.info["license"].startswith("AGPL-3.0") and isinstance(ckpt.info["version"], str)
        assert ckpt.keypoint_shape == ((3, 3) if task == "keypoints" else None), task
        assert ckpt.head_class in {"Detect", "Segment26", "OBB26", "Pose26"}, task


# ---------------------------------------------------------------- hand-made files


@pytest.mark.parametrize("protocol", [2, 4])
def test_a_publisher_format_file_reads_without_running_anything(tmp_path, protocol):
    path = write_publisher_file(tmp_path / "tiny.pt", tiny_publisher_model(), protocol=protocol)
    assert is_published_checkpoint(path)
    ckpt = read_published_checkpoint(path)
    assert isinstance(ckpt, PublishedCheckpoint) and ckpt.path == path
    expected = _expected_state()
    assert list(ckpt.state) == list(expected)  # params, persistent buffers, children: torch's order
    assert "model.2.grid" not in ckpt.state
    for name, tensor in ckpt.state.items():
        assert tensor.dtype == expected[name].dtype and torch.equal(tensor, expected[name]), name
        assert tensor.is_contiguous()
    assert ckpt.state["model.0.bn.num_batches_tracked"].item() == 7
    assert (ckpt.model_class, ckpt.head_class) == ("DetectionModel", "Detect")
    assert ckpt.class_names == ["circle", "square"]
    assert ckpt.img_size == 96  # the top-level training arguments win over the model's own copy
    assert ckpt.keypoint_shape == (5, 3) and ckpt.used_ema is False
    # plain values only: the model record, training args and git dicts are not metadata
    assert ckpt.info == {"date": "2026-01-01T00:00:00", "version": "8.4.0", "license": "AGPL-3.0", "epoch": -1,
                         "best_fitness": None, "ema": None, "optimizer": None}


def test_the_state_prefers_ema_and_plain_torch_files_are_not_publisher_files(tmp_path):
    path = tmp_path / "ema.pt"
    torch.save({"model": None, "ema": tiny_publisher_model().half()}, path, pickle_module=_PICKLE_MODULE)
    ckpt = read_published_checkpoint(path)
    assert ckpt.used_ema and list(ckpt.state) == list(_expected_state())
    torch.save({"state_dict": {"w": torch.ones(2)}}, tmp_path / "plain.ckpt")
    assert not is_published_checkpoint(tmp_path / "plain.ckpt")
    assert not is_published_checkpoint(tmp_path / "missing.pt")


def test_stack_global_names_are_followed_through_the_memo(tmp_path):
    data = _pickle_bytes(write_publisher_file(tmp_path / "p4.pt", tiny_publisher_model(), protocol=4))
    ops = [op.name for op, _, _ in pickletools.genops(data)]
    assert "GLOBAL" not in ops and "STACK_GLOBAL" in ops and "MEMOIZE" in ops and "BINGET" in ops
    scan = scan_pickle(data)
    assert scan.complete
    # Concat's module string was written once for Conv: its STACK_GLOBAL reads it back from the memo
    assert {(_CONV_MODULE, "Conv"), (_CONV_MODULE, "Concat"), ("ultralytics.nn.tasks", "DetectionModel"),
            ("torch._utils", "_rebuild_tensor_v2")} <= set(scan.globals)


# ---------------------------------------------------------------- poisoned files


@pytest.mark.parametrize("payload", [SystemPayload, EvalPayload])
def test_the_payloads_are_live(tmp_path, payload):
    """Control: an ordinary unpickler runs them (so the refusals below are meaningful)."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(payload(marker), protocol=2))
    assert marker.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol 4:UserWarning")  # torch.load's, in load_checkpoint
@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize(("payload", "global_name", "where"), [
    (SystemPayload, f"{os.system.__module__}.system", "top"),  # posix.system on Linux and macOS
    (EvalPayload, "eval", "module"),
])
def test_a_poisoned_publisher_file_is_refused_before_it_runs(tmp_path, payload, global_name, where, protocol):
    marker = tmp_path / "pwned"
    model = tiny_publisher_model()
    if where == "module":  # hidden in a layer's attributes, after many records were built
        model.model[2].hook = payload(marker)
        path = write_publisher_file(tmp_path / "evil.pt", model, protocol=protocol)
    else:
        path = write_publisher_file(tmp_path / "evil.pt", model, protocol=protocol, stopper=payload(marker))
    assert is_published_checkpoint(path)  # it looks like one; reading it is what refuses it
    with pytest.raises(UserError) as err:
        read_published_checkpoint(path)
    text = str(err.value)
    assert text.startswith(f"Refused checkpoint '{path}'.") and global_name in text, text
    assert "arbitrary code" in text and "nothing in the file was loaded or run" in text
    with pytest.raises(UserError, match="Refused checkpoint") as err:
        load_checkpoint(path)  # the loader every command uses gives the same refusal
    assert global_name in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize(("module", "name"), [
    ("os", "system"), ("posix", "system"), ("subprocess", "Popen"), ("builtins", "eval"),
    ("__builtin__", "getattr"), ("builtins", "__import__"), ("torch", "load"), ("torch.serialization", "load"),
    ("torch._utils", "_rebuild_device_tensor_from_numpy"), ("ultralyticsx.nn", "Conv"),
    ("ultralytics.nn.tasks", "__init__.x"), ("copyreg", "_reconstructor"), ("numpy", "load"),
])
def test_every_global_outside_the_allowlist_is_refused(tmp_path, module, name):
    path = tmp_path / "one.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.PROTO + b"\x02" + pickle.GLOBAL
                         + f"{module}\n{name}\n".encode() + pickle.STOP)
    with pytest.raises(UserError, match="Refused checkpoint") as err:
        read_published_checkpoint(path)
    assert f"'{module}.{name}'" in str(err.value)


# ---------------------------------------------------------------- corrupt and empty files


def _rewrite(src: Path, dst: Path, edit) -> Path:
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dst, "w") as new:
        for info in old.infolist():
            data = edit(info.filename, old.read(info.filename))
            if data is not None:
                new.writestr(info.filename, data)
    return dst


def test_corrupt_files_are_user_errors(tmp_path):
    good = write_publisher_file(tmp_path / "good.pt", tiny_publisher_model())
    body = good.read_bytes()
    cases = {
        "truncated": ((tmp_path / "cut.pt"), "not a zip archive"),
        "no storage": (_rewrite(good, tmp_path / "nostore.pt",
                                lambda n, d: None if n.endswith("/data/1") else d), "has no storage"),
        "short storage": (_rewrite(good, tmp_path / "short.pt",
                                   lambda n, d: d[:-2] if n.endswith("/data/0") else d), "bytes"),
        "no pickle": (_rewrite(good, tmp_path / "nopkl.pt",
                               lambda n, d: None if n.endswith("data.pkl") else d), "no <folder>/data.pkl"),
        "cut pickle": (_rewrite(good, tmp_path / "cutpkl.pt",
                                lambda n, d: d[: len(d) // 2] if n.endswith("data.pkl") else d), "ends early"),
        "not a zip": ((tmp_path / "text.pt"), "not a zip archive"),
    }
    (tmp_path / "cut.pt").write_bytes(body[: len(body) // 2])
    (tmp_path / "text.pt").write_text("hello")
    for case, (path, words) in cases.items():
        with pytest.raises(UserError) as err:
            read_published_checkpoint(path)
        text = str(err.value)
        assert text.startswith(f"Cannot read checkpoint '{path}'.") and words in text, (case, text)
    with pytest.raises(UserError, match="Checkpoint not found"):
        read_published_checkpoint(tmp_path / "missing.pt")


def test_files_without_a_model_or_tensors_say_so(tmp_path):
    with pytest.raises(UserError, match=r"holds no model: its 'ema' and 'model' entries are empty \(None\)"):
        read_published_checkpoint(write_publisher_file(tmp_path / "none.pt"))
    with pytest.raises(UserError, match="holds a DetectionModel with no tensors"):
        read_published_checkpoint(write_publisher_file(tmp_path / "empty.pt", DetectionModel()))
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(UserError, match="not a checkpoint"):
        read_published_checkpoint(tmp_path / "list.pt")
