"""One image's predictions as tensors: built generically from the task's ``predict`` hook dicts.

The engine names no task, and neither does this module. Each key of the hook's
dicts becomes one field, named by its plural (``box`` -> ``boxes``, ``score`` ->
``scores``, ``rbox`` -> ``rboxes``, ``mask`` -> ``masks``; a key already plural,
``keypoints``, stays), converted by the value's form:

- numbers or nested lists of numbers -> a tensor ``(N, *shape)``: ``int64`` when
  every value is an integer, ``bool`` for booleans, else ``float32``;
- a COCO RLE (``{"size": [h, w], "counts": ...}``) -> a ``bool`` mask tensor ``(N, h, w)``;
- anything else (strings, ragged lists) -> a plain list of ``N`` values.

With the built-in tasks that gives ``boxes (N, 4)`` xyxy image pixels,
``scores (N,)``, ``labels (N,)`` int64, and per task ``masks (N, H, W)`` bool,
``rboxes (N, 5)`` ``[cx, cy, w, h, angle]`` plus ``polygons (N, 4, 2)``,
``keypoints (N, K, 3)`` ``[x, y, confidence]``; a plugin's own keys come out the
same way (the ``cls`` plugin: ``ranks``, ``scores``, ``labels`` of its top classes).
The per-instance class name (``name``) is kept as :attr:`Prediction.label_names`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

NAME_KEY = "name"
"""The predict-dict key holding the class name of a row (kept as a list, not a field)."""


@dataclass(frozen=True)
class FieldLayout:
    """How one predict-dict key becomes a field.

    Attributes:
        key: the key in the hook's dicts (``"box"``).
        name: the field name (``"boxes"``).
        kind: ``"tensor"``, ``"rle"`` (a mask) or ``"list"``.
        shape: per-instance shape of a tensor field (``(4,)`` for a box, ``()`` for a score).
        dtype: ``"float32"``, ``"int64"`` or ``"bool"`` for a tensor field.
    """

    key: str
    name: str
    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = "float32"


def plural(key: str) -> str:
    """The field name of a predict-dict key: ``box`` -> ``boxes``, ``score`` -> ``scores``, ``keypoints`` unchanged."""
    if key.endswith("s"):
        return key
    if key.endswith(("x", "ch", "sh")):
        return key + "es"
    return key + "s"


def _is_rle(value: Any) -> bool:
    return isinstance(value, Mapping) and "size" in value and "counts" in value


def _tensor_form(values: Sequence[Any]) -> tuple[tuple[int, ...], str] | None:
    """``(per-instance shape, dtype)`` when every value is a number array of one shape, else None."""
    import numpy as np

    shapes, kinds = set(), set()
    for v in values:
        try:
            arr = np.asarray(v)
        except ValueError:  # ragged
            return None
        if arr.dtype.kind not in "biuf":
            return None
        shapes.add(arr.shape)
        kinds.add(arr.dtype.kind)
    if len(shapes) != 1:
        return None
    if kinds == {"b"}:
        dtype = "bool"
    elif kinds <= {"i", "u"}:
        dtype = "int64"
    else:
        dtype = "float32"
    return next(iter(shapes)), dtype


def layout_of(rows: Sequence[Mapping[str, Any]]) -> dict[str, FieldLayout]:
    """The field layout of a non-empty list of predict dicts (keys in first-seen order)."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys and k != NAME_KEY]
    out: dict[str, FieldLayout] = {}
    for key in keys:
        values = [row.get(key) for row in rows]
        name = plural(key)
        if any(key not in row for row in rows):
            out[key] = FieldLayout(key, name, "list")
        elif all(_is_rle(v) for v in values):
            out[key] = FieldLayout(key, name, "rle")
        elif (form := _tensor_form(values)) is not None:
            out[key] = FieldLayout(key, name, "tensor", *form)
        else:
            out[key] = FieldLayout(key, name, "list")
    return out


def fields_from_rows(rows: Sequence[Mapping[str, Any]], layout: Mapping[str, FieldLayout],
                     image_hw: tuple[int, int]) -> dict[str, Any]:
    """``{field name: tensor (N, ...) or list}`` for ``rows`` laid out as ``layout`` (``N`` may be 0).

    RLE masks decode to ``(N, H, W)`` bool (``(0, *image_hw)`` when there are none). A key whose
    values on this image do not have the layout's form (another shape) is kept as a plain list.
    """
    import numpy as np
    import torch

    out: dict[str, Any] = {}
    n = len(rows)
    for spec in layout.values():
        values = [row.get(spec.key) for row in rows]
        if spec.kind == "tensor" and _has_shape(values, spec.shape):
            dtype = getattr(torch, spec.dtype)
            out[spec.name] = (torch.as_tensor(np.asarray(values), dtype=dtype) if n
                              else torch.zeros((0, *spec.shape), dtype=dtype))
        elif spec.kind == "rle" and all(_is_rle(v) for v in values):
            out[spec.name] = _decode_masks(values, image_hw)  # type: ignore[arg-type]
        else:  # a list field, or values of another form than the layout learnt (kept as they are)
            out[spec.name] = values
    return out


def _has_shape(values: Sequence[Any], shape: tuple[int, ...]) -> bool:
    """True when every value is a number array of per-instance ``shape`` (always for no values)."""
    form = _tensor_form(values) if values else (shape, "")
    return form is not None and form[0] == shape


def _decode_masks(rles: Sequence[Mapping[str, Any]], image_hw: tuple[int, int]) -> Tensor:
    """``(N, h, w)`` bool from COCO RLEs (``counts`` as str or bytes)."""
    import numpy as np
    import torch

    if not rles:
        return torch.zeros((0, *image_hw), dtype=torch.bool)
    from pycocotools import mask as mask_utils

    coded = [{"size": list(r["size"]),
              "counts": r["counts"].encode("ascii") if isinstance(r["counts"], str) else r["counts"]} for r in rles]
    hwn = mask_utils.decode(coded)  # (h, w, N) uint8
    return torch.from_numpy(np.ascontiguousarray(hwn.transpose(2, 0, 1)).astype(bool))


@dataclass
class Prediction:
    """One image's predictions: tensors to compute with, the task's dicts to serialise, a drawing to look at.

    Attributes:
        path: the image file, or None for an array / PIL image given directly.
        image: the input image, ``(H, W, 3)`` uint8 RGB.
        names: the model's class names; ``names[labels[i]]`` is row ``i``'s class.
        fields: every per-instance field (see the module docstring), each ``(N, ...)``.
        rows: the task's ``predict`` hook dicts, JSON-able (what ``lucid predict`` prints and writes).
        label_names: each row's class name, ``N`` strings.
    """

    path: Path | None
    image: np.ndarray
    names: list[str]
    fields: dict[str, Any]
    rows: list[dict[str, Any]]
    label_names: list[str] = field(default_factory=list)
    drawer: Callable[[np.ndarray, list[dict[str, Any]]], Any] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k} {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}" if hasattr(v, "shape") else f"{k} [{len(v)}]"
            for k, v in self.fields.items()
        )
        where = str(self.path) if self.path is not None else "array"
        return f"Prediction({where}, {self.width}x{self.height}, {len(self)} rows: {shown})"

    def __len__(self) -> int:
        """``N``, the number of rows (detections, or top classes)."""
        return len(self.rows)

    @property
    def height(self) -> int:
        return int(self.image.shape[0])

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def boxes(self) -> Tensor | None:
        """``(N, 4)`` float32 ``[x1, y1, x2, y2]`` in image pixels; None when the task gives no boxes."""
        return self.fields.get("boxes")

    @property
    def scores(self) -> Tensor | None:
        """``(N,)`` float32 confidences."""
        return self.fields.get("scores")

    @property
    def labels(self) -> Tensor | None:
        """``(N,)`` int64 class indices into :attr:`names`."""
        return self.fields.get("labels")

    @property
    def masks(self) -> Tensor | None:
        """``(N, H, W)`` bool instance masks in image pixels, when the task predicts masks."""
        return self.fields.get("masks")

    @property
    def rboxes(self) -> Tensor | None:
        """``(N, 5)`` float32 rotated boxes ``[cx, cy, w, h, angle]`` (pixels, radians), when the task predicts them."""
        return self.fields.get("rboxes")

    @property
    def keypoints(self) -> Tensor | None:
        """``(N, K, 3)`` float32 ``[x, y, confidence]`` in image pixels, when the task predicts keypoints."""
        return self.fields.get("keypoints")

    def plot(self) -> np.ndarray:
        """The predictions drawn on a copy of the image by the task's ``draw`` hook, ``(H, W, 3)`` uint8 RGB."""
        import numpy as np

        from lucidyolo.errors import NotAvailableError

        if self.drawer is None:
            raise NotAvailableError("This prediction cannot be drawn: it was made without a model's draw hook.",
                                    fix="Use Model.predict(...) to get drawable predictions.")
        drawn = self.drawer(self.image, self.rows)
        return np.array(drawn.convert("RGB") if hasattr(drawn, "convert") else drawn, dtype=np.uint8)

    def save(self, path: str | Path, quality: int = 92) -> Path:
        """Write :meth:`plot` to ``path`` (format from the suffix; JPEG at ``quality``, as ``lucid predict --save``)."""
        from PIL import Image

        from lucidyolo.atomic_write import atomic_open

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        img = Image.fromarray(self.plot())
        fmt = Image.registered_extensions().get(path.suffix.lower(), "JPEG")
        with atomic_open(path, "wb") as out:
            img.save(out, format=fmt, **({"quality": quality} if fmt == "JPEG" else {}))
        return path

    def to_json(self) -> dict[str, Any]:
        """``{"image", "height", "width", "predictions"}``: one entry of ``lucid predict --output``'s ``images``.

        ``image`` is None for an array or PIL image given directly.
        """
        out = {"image": None if self.path is None else str(self.path), "height": self.height, "width": self.width,
               "predictions": self.rows}
        return json.loads(json.dumps(out))  # a deep, plain copy
