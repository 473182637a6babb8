"""Where each tensor of a published YOLO26 checkpoint lives in lucid's model, and back.

The publisher's state dict names modules by their position in one flat list
(``model.<i>.<rest>``, the head at ``model.23``); lucid names them by role
(``backbone.stage4.1.<rest>``, ``head.o2o.stems.logits.<rest>``). Inside a
block the names are the same (``cv1``, ``m.0.cv2``, ``attn.qkv`` ...), so the
mapping is a prefix table for the trunk plus what the model declares:

- each head stem's :attr:`~lucidyolo.models.head.StemSpec.published` module
  (``cv2`` boxes, ``cv3`` logits, a task's ``cv4``); the one-to-one branch is
  the same name with the prefix ``one2one_``; a tower's two units are
  ``<i>.0`` and ``<i>.1`` and its own output conv ``<i>.2``; an extra output
  with its own ``published`` name is ``<name>.<i>``;
- each top-level task module (``model.extras``, ``model.aux``) with a
  ``published`` attribute (the seg prototypes ``proto``, the keypoint flow
  ``flow_model``), whose inner names are the publisher's.

Nothing here names a task: tasks declare their modules' published names.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from lucidyolo.errors import UserError

HEAD_INDEX = 23
"""Position of the head in the publisher's module list."""

TRUNK_MODULES: dict[str, int] = {
    "backbone.stem.0": 0,
    "backbone.stem.1": 1,
    "backbone.stage2": 2,
    "backbone.stage3.0": 3,
    "backbone.stage3.1": 4,
    "backbone.stage4.0": 5,
    "backbone.stage4.1": 6,
    "backbone.stage5.0": 7,
    "backbone.stage5.1": 8,
    "backbone.stage5.2": 9,
    "backbone.stage5.3": 10,
    "neck.top4": 13,
    "neck.out3": 16,
    "neck.down3": 17,
    "neck.out4": 19,
    "neck.down4": 20,
    "neck.out5": 22,
}
"""lucid's trunk modules and their index in the publisher's list (11, 12, 14, 15, 18, 21 are
parameter-free upsampling and concatenation)."""

BRANCH_PREFIX: dict[str, str] = {"o2m": "", "o2o": "one2one_"}
"""The publisher's name prefix of each head branch's modules."""


def _head_name(model: nn.Module, parts: list[str]) -> str | None:
    # parts: [branch, "stems", stem, "levels"|"outputs", ...]
    branch, _, stem_name, kind, *rest = parts
    stems = model.head.o2m.stems  # type: ignore[union-attr]
    if branch not in BRANCH_PREFIX or stem_name not in stems:
        return None
    spec = stems[stem_name].spec
    if not spec.published:
        return None
    prefix = f"model.{HEAD_INDEX}.{BRANCH_PREFIX[branch]}"
    if kind == "levels":
        return prefix + ".".join([spec.published, *rest])
    out_name, level, *tail = rest
    if out_name == spec.name and spec.published_output:
        return prefix + ".".join([spec.published_output, level, *tail])
    if out_name == spec.name:
        return prefix + ".".join([spec.published, level, "2", *tail])
    out = next((o for o in spec.extra_outputs if o.name == out_name), None)
    if out is None or not out.published:
        return None
    return prefix + ".".join([out.published, level, *tail])


def published_names(model: nn.Module) -> dict[str, str]:
    """``{lucid state-dict name: publisher's name}`` for every tensor of ``model``'s state dict.

    Raises:
        ValueError: a tensor with no published home (a module that declares none).
    """
    names: dict[str, str] = {}
    missing: list[str] = []
    for name in model.state_dict():
        parts = name.split(".")
        found: str | None = None
        if parts[0] in ("backbone", "neck"):
            for depth in (3, 2):
                module = ".".join(parts[:depth])
                if module in TRUNK_MODULES:
                    found = ".".join([f"model.{TRUNK_MODULES[module]}", *parts[depth:]])
                    break
        elif parts[0] == "head" and len(parts) > 4:
            found = _head_name(model, parts[1:])
        elif parts[0] in ("extras", "aux"):
            published = getattr(getattr(model, parts[0])[parts[1]], "published", "")
            if published:
                found = ".".join([f"model.{HEAD_INDEX}.{published}", *parts[2:]])
        if found is None:
            missing.append(name)
        else:
            names[name] = found
    if missing:
        raise ValueError(f"{len(missing)} tensors have no published name, e.g. {missing[:3]}")
    return names


def load_published_state(model: nn.Module, state: Mapping[str, Tensor], source: str = "the checkpoint") -> None:
    """Copy a published state dict into ``model`` exactly: every tensor, same shapes, nothing left over.

    Raises:
        UserError: a tensor is missing, has another shape, or the file has tensors the model has no home for
            (the file is another layout than the model built for it).
    """
    names = published_names(model)
    own = model.state_dict()
    missing = [pub for pub in names.values() if pub not in state]
    extra = sorted(set(state) - set(names.values()))
    wrong = [
        f"{pub} {tuple(state[pub].shape)} vs {tuple(own[name].shape)}"
        for name, pub in names.items() if pub in state and tuple(state[pub].shape) != tuple(own[name].shape)
    ]
    if missing or extra or wrong:
        detail = "; ".join(
            part for part in (
                f"{len(missing)} tensors missing (e.g. {', '.join(missing[:2])})" if missing else "",
                f"{len(extra)} tensors without a place (e.g. {', '.join(extra[:2])})" if extra else "",
                f"{len(wrong)} shapes differ (e.g. {wrong[0]})" if wrong else "",
            ) if part
        )
        raise UserError(
            f"{source} does not match the YOLO26 layout lucid built for it: {detail}.",
            why="a published checkpoint loads one tensor to one tensor; this file is another layout or version.",
            fix="pass an unmodified published YOLO26 file (yolo26{n,s,m,l,x}.pt, -seg, -obb, -pose) or a lucid checkpoint.",
        )
    model.load_state_dict({name: state[pub].to(own[name].dtype) for name, pub in names.items()})
