"""Start a model from other weights: copy by name and shape, move class rows by class name.

The rule, for every tensor of the freshly built model (its state dict):

1. a task's ``transfer_weights`` hook may map it or skip it with a reason
   (keypoint stems with another K);
2. a *per-class* tensor (a module lists it in its ``class_params`` attribute:
   the class stems of both head branches, seg's semantic head, a classifier's
   last layer; dim 0 indexes classes) gets, for each of the model's classes,
   the row of the same class in the checkpoint; rows of new classes keep the
   fresh initialisation (the prior bias of a new model);
3. any other tensor is copied when the checkpoint has the same name with the
   same shape, and else keeps its fresh initialisation, with the reason
   (``missing``: the checkpoint has no such tensor, e.g. another task's stem;
   ``shape``).

Classes meet by name (any order; names only the checkpoint has are dropped) or,
with ``class_match: position``, by index. The :class:`TransferReport` is what
the run prints in one line and writes to ``transfer.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lucidyolo.errors import ConfigError, UserError


@dataclass
class SourceWeights:
    """The weights ``--model.weights`` names, read safely.

    Attributes:
        path: the local file.
        task: the task that trained them.
        variant: the scale-table row of their model.
        class_names: their classes, in index order.
        dataset_meta: the dataset meta they were trained with (e.g. ``num_keypoints``).
        state: model tensors by name (the EMA weights when the file has them).
        used_ema: whether ``state`` holds the EMA weights.
        source_format: ``"lucid"`` or the published format's name.
        source_names: for a published file, the publisher's name of each tensor of ``state``.
    """

    path: Path
    task: str
    variant: str
    class_names: list[str]
    dataset_meta: dict[str, Any]
    state: dict[str, Tensor]
    used_ema: bool
    source_format: str = "lucid"
    source_names: dict[str, str] = field(default_factory=dict)


def read_weights(path: Path) -> SourceWeights:
    """Read a lucid checkpoint or weights file through the weights-only loader, or a published YOLO26 file
    through its reader that runs nothing (:mod:`lucidyolo.engine.weights.published_weights`).

    Raises:
        UserError: an unsafe or foreign file (refused before anything in it runs), or a
            torch file that is not lucid's.
    """
    from lucidyolo.engine.weights.published_weights import read_model_checkpoint

    ckpt = read_model_checkpoint(path)
    lucid = ckpt.get("lucid")
    config = lucid.get("config") if isinstance(lucid, dict) else None
    if not isinstance(config, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise UserError(
            f"{path} is not a lucid checkpoint or weights file (it has no 'lucid' section with a config).",
            why="starting from weights needs their task, variant and class names, which lucid files carry.",
            fix="Pass a checkpoint written by `lucid fit` or a file from `lucid export --format weights`.",
        )
    model = config.get("model") or {}
    state = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    ema = ckpt.get("lucid_ema")
    used_ema = isinstance(ema, dict) and isinstance(ema.get("shadow"), dict)
    if used_ema:
        state.update(ema["shadow"])
    published = lucid.get("source") if isinstance(lucid.get("source"), dict) else None
    return SourceWeights(
        path=Path(path), task=str(model.get("task")), variant=str(model.get("variant")),
        class_names=[str(n) for n in lucid.get("class_names") or []], dataset_meta=dict(lucid.get("dataset_meta") or {}),
        state=state, used_ema=used_ema or bool(published and published.get("used_ema")),
        source_format=str(published["format"]) if published else "lucid",
        source_names=dict(published.get("names") or {}) if published else {},
    )


def match_classes(source: Sequence[str], target: Sequence[str], mode: str = "name") -> list[int]:
    """``class_map[j]``: the checkpoint's index of the model's class ``j``, or ``-1`` for a new class.

    Args:
        source: the checkpoint's class names.
        target: the dataset's class names.
        mode: ``name`` (equal names, any order) or ``position`` (the same index).
    """
    if mode == "position":
        return [j if j < len(source) else -1 for j in range(len(target))]
    if mode != "name":
        raise ValueError(f"class_match must be 'name' or 'position', got {mode!r}")
    index: dict[str, int] = {}
    for i, name in enumerate(source):
        index.setdefault(name, i)  # a duplicated name keeps its first row
    return [index.get(name, -1) for name in target]


def per_class_tensors(model: nn.Module) -> set[str]:
    """State-dict names whose dim 0 indexes classes: what modules list in ``class_params``."""
    names: set[str] = set()
    for prefix, module in model.named_modules():
        for local in getattr(module, "class_params", ()) or ():
            names.add(f"{prefix}.{local}" if prefix else local)
    return names


@dataclass
class TransferReport:
    """What :func:`transfer_weights` did (the run's line and ``transfer.json``)."""

    source: str
    source_task: str
    source_variant: str
    used_ema: bool
    class_match: str
    class_names: list[str]
    source_class_names: list[str]
    class_map: list[int]
    copied: list[str] = field(default_factory=list)
    class_rows: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    unused: list[str] = field(default_factory=list)
    source_format: str = "lucid"
    source_names: dict[str, str] = field(default_factory=dict)

    def head_of(self, name: str) -> str | None:
        """``one-to-one`` / ``one-to-many`` for a head tensor of a published source (from its publisher's name)."""
        published = self.source_names.get(name, "")
        if not published.startswith("model.23."):
            return None
        return "one-to-one" if published.startswith("model.23.one2one_") else "one-to-many"

    @property
    def matched(self) -> list[str]:
        return [n for n, i in zip(self.class_names, self.class_map, strict=True) if i >= 0]

    @property
    def new(self) -> list[str]:
        return [n for n, i in zip(self.class_names, self.class_map, strict=True) if i < 0]

    @property
    def dropped(self) -> list[str]:
        used = set(self.class_map)
        return [n for i, n in enumerate(self.source_class_names) if i not in used]

    def classes_line(self) -> str:
        """``classes: 3 of 4 matched by name (person, car, dog); new: kite``."""
        how = "by name" if self.class_match == "name" else "by position"
        text = f"classes: {len(self.matched)} of {len(self.class_names)} matched {how}"
        if self.matched:
            text += f" ({_listing(self.matched)})"
        if self.new:
            text += f"; new: {_listing(self.new)}"
        if self.dropped:
            text += f"; dropped: {_listing(self.dropped)}"
        return text

    def line(self) -> str:
        """The run's one summary line."""
        total = len(self.copied) + len(self.class_rows) + len(self.skipped)
        reasons: dict[str, int] = {}
        for why in self.skipped.values():
            key = why.split(":", 1)[0]
            reasons[key] = reasons.get(key, 0) + 1
        skipped = f" (kept fresh: {', '.join(f'{n} {k}' for k, n in sorted(reasons.items()))})" if reasons else ""
        published = f"{self.source_format}: " if self.source_format != "lucid" else ""
        origin = f"{published}{self.source_task} {self.source_variant}{', EMA' if self.used_ema else ''}"
        return (f"weights: {self.source} ({origin}): {len(self.copied) + len(self.class_rows)} of {total} tensors "
                f"loaded{skipped}; {self.classes_line()}")

    def as_json(self) -> dict[str, Any]:
        """``transfer.json``: the source, the class mapping and every tensor's fate."""
        return {
            "source": self.source, "source_format": self.source_format, "source_task": self.source_task,
            "source_variant": self.source_variant, "used_ema": self.used_ema, "class_match": self.class_match,
            "classes": {
                "mapping": [{"name": n, "index": j, "from_index": i if i >= 0 else None,
                             "from_name": self.source_class_names[i] if i >= 0 else None}
                            for j, (n, i) in enumerate(zip(self.class_names, self.class_map, strict=True))],
                "matched": self.matched, "new": self.new, "dropped": self.dropped,
            },
            "tensors": {
                "copied": len(self.copied) + len(self.class_rows), "kept_fresh": len(self.skipped),
                "class_rows_mapped": self.class_rows, "skipped": self.skipped, "unused_in_checkpoint": self.unused,
            },
            **({"published_names": {
                n: {"from": self.source_names[n], **({"head": h} if (h := self.head_of(n)) else {})}
                for n in [*self.copied, *self.class_rows] if n in self.source_names
            }} if self.source_names else {}),
            "summary": self.line(),
        }


def _listing(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _dims(t: Tensor) -> str:
    return "x".join(map(str, t.shape)) or "scalar"


@torch.no_grad()
def transfer_weights(
    model: nn.Module, source: SourceWeights, class_names: Sequence[str], meta: Mapping[str, Any] | None = None,
    class_match: str = "name", hook: Callable[..., Mapping[str, Any]] | None = None, shown_source: str | None = None,
) -> TransferReport:
    """Load what fits of ``source`` into ``model`` (in place) and say what happened.

    Args:
        model: the freshly built model (its values are the fresh initialisation).
        source: the weights to start from.
        class_names: the dataset's classes (the model's class order).
        meta: this run's dataset meta.
        class_match: ``name`` or ``position``.
        hook: the task's ``transfer_weights`` hook, or None.
        shown_source: how to name the source in messages (default: its path).

    Raises:
        UserError: nothing at all fits (the weights belong to an unrelated model).
    """
    class_map = match_classes(source.class_names, class_names, class_match)
    target = model.state_dict()
    report = TransferReport(
        source=shown_source or str(source.path), source_task=source.task, source_variant=source.variant,
        used_ema=source.used_ema, class_match=class_match, class_names=list(class_names),
        source_class_names=list(source.class_names), class_map=class_map,
        source_format=source.source_format, source_names=dict(source.source_names),
    )
    handled: Mapping[str, Any] = {}
    if hook is not None:
        handled = hook(source=source.state, target=target, class_map=class_map, source_meta=source.dataset_meta,
                       meta=dict(meta or {})) or {}
    per_class = per_class_tensors(model)
    new_state: dict[str, Tensor] = {}
    for name, fresh in target.items():
        got = source.state.get(name)
        if name in handled:
            value = handled[name]
            if isinstance(value, str):
                report.skipped[name] = value
                new_state[name] = fresh
            else:
                if tuple(value.shape) != tuple(fresh.shape):
                    raise ValueError(f"transfer_weights hook returned {name} of shape {_dims(value)}, "
                                     f"the model has {_dims(fresh)}")
                report.copied.append(name)
                new_state[name] = value.to(fresh.dtype)
        elif got is None:
            report.skipped[name] = "missing: not in the checkpoint"
            new_state[name] = fresh
        elif name in per_class:
            if tuple(got.shape[1:]) != tuple(fresh.shape[1:]):
                report.skipped[name] = f"shape: {_dims(got)} in the checkpoint, {_dims(fresh)} in the model"
                new_state[name] = fresh
                continue
            rows = fresh.clone()
            for j, i in enumerate(class_map):
                if 0 <= i < got.shape[0]:
                    rows[j] = got[i].to(rows.dtype)
            report.class_rows.append(name)
            new_state[name] = rows
        elif tuple(got.shape) != tuple(fresh.shape):
            report.skipped[name] = f"shape: {_dims(got)} in the checkpoint, {_dims(fresh)} in the model"
            new_state[name] = fresh
        else:
            report.copied.append(name)
            new_state[name] = got.to(fresh.dtype)
    report.unused = sorted(set(source.state) - set(target))
    if not report.copied and not report.class_rows:
        raise UserError(
            f"Nothing in {report.source} fits this model: no tensor has a matching name and shape.",
            why=f"the weights belong to a {source.task} {source.variant} model whose layers this one does not share.",
            fix="Start from weights of a lucid model of the same variant (any task).",
        )
    model.load_state_dict(new_state, strict=True)
    return report


def refuse_variant_mismatch(source: SourceWeights, variant: str, shown_source: str) -> None:
    """A checkpoint of another variant would load only where shapes happen to agree: refuse it whole.

    Raises:
        ConfigError: the variants differ.
    """
    if source.variant != variant:
        raise ConfigError(
            f"`model.weights` {shown_source} holds a {source.variant!r} model; this run builds {variant!r}.",
            why="layers of other widths and depths cannot be copied, and loading only the few tensors whose shapes "
            "happen to agree would leave a half-initialised model.",
            fix=f"Add `--model.variant {source.variant}`, or start from weights of a {variant!r} model.",
        )
