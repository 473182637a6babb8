"""The image-level target of classification: one class index per image (``image_class``).

A per-image field registered with lucidyolo's field registry: augmentation
leaves it alone (it has no geometry), joining images keeps the main image's,
and it travels through the batch transport as one ``(B,)`` int64 tensor that
arrives on the device as ``gt["image_class"]``. Numpy only (runs in loader
workers, imported by the torch-free spec module).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from lucidyolo.structures.fields import AttrSpec, FieldSpec, register_field

NAME = "image_class"


def _pack(values: Sequence[Mapping[str, Any]], counts: np.ndarray) -> dict[str, np.ndarray]:
    labels = [-1 if v[NAME] is None else int(v[NAME]) for v in values]
    return {NAME: np.asarray(labels, dtype=np.int64)}


def _unpack(tensors: Mapping[str, Any], image_of: Any, slot: Any, batch: int, m: int) -> dict[str, Any]:
    return {NAME: tensors[NAME]}


SPEC = FieldSpec(
    name=NAME,
    attrs=(AttrSpec(NAME, np.int64, (), per_image=True, fill=-1),),
    packed=(NAME,),
    pack=_pack,
    unpack=_unpack,
)
register_field(SPEC)
