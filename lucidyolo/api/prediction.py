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

On top of the fields, :class:`Prediction` offers the views of :mod:`lucidyolo.api.accessors`
(``boxes.xyxy``, ``masks.xy``, ``obb.xywhr``, ``keypoints.xy``...), read from the fields by name.
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

    from lucidyolo.api.accessors import OBB, Boxes, Keypoints, Masks

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
        path: the image file (a video's file for one of its frames), or None for an array / PIL image
            given directly.
        image: the input image, ``(H, W, 3)`` uint8 RGB (an array given as BGR is flipped to RGB first).
        names: the model's classes, ``{index: name}`` (a list given here becomes that dict);
            ``names[int(labels[i])]`` is row ``i``'s class.
        fields: every per-instance field (see the module docstring), each ``(N, ...)``.
        rows: the task's ``predict`` hook dicts, JSON-able (what ``lucid predict`` prints and writes).
        label_names: each row's class name, ``N`` strings.
        frame: the frame's index in its video (``Model.predict(video, stream=True)``), else None.

    The familiar views (None when the task does not predict that field): :attr:`boxes`
    (``.xyxy .xywh .conf .cls .data``), :attr:`masks` (``.data .xy``), :attr:`obb` (``.xywhr .conf .cls``),
    :attr:`keypoints` (``.data .xy .conf``). The raw tensors are :attr:`fields` (``fields["boxes"]`` ...),
    and :attr:`scores` / :attr:`labels` / :attr:`rboxes` stay tensors.
    """

    path: Path | None
    image: np.ndarray
    names: dict[int, str]
    fields: dict[str, Any]
    rows: list[dict[str, Any]]
    label_names: list[str] = field(default_factory=list)
    drawer: Callable[[np.ndarray, list[dict[str, Any]]], Any] | None = field(default=None, repr=False)
    frame: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.names, Mapping):  # a list of names, in label order
            self.names = dict(enumerate(self.names))
        self.names = {int(k): str(v) for k, v in self.names.items()}

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k} {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}" if hasattr(v, "shape") else f"{k} [{len(v)}]"
            for k, v in self.fields.items()
        )
        where = str(self.path) if self.path is not None else "array"
        if self.frame is not None:
            where += f" frame {self.frame}"
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
    def orig_shape(self) -> tuple[int, int]:
        """``(H, W)`` of the input image."""
        return (self.height, self.width)

    @property
    def orig_img(self) -> np.ndarray:
        """The input image, ``(H, W, 3)`` uint8 RGB (as :attr:`image`)."""
        return self.image

    def _conf_cls(self) -> dict[str, Any] | None:
        scores, labels = self.fields.get("scores"), self.fields.get("labels")
        if not _is_tensor(scores) or not _is_tensor(labels):
            return None
        return {"conf": scores, "cls": labels}

    @property
    def boxes(self) -> Boxes | None:
        """The rows' boxes: ``.xyxy (N, 4)`` float32 image pixels, ``.xywh (N, 4)`` centre and size,
        ``.conf (N,)`` float32, ``.cls (N,)`` int64, ``.data (N, 6)``; None when the task gives no boxes.

        The tensor itself is ``boxes.xyxy`` (``fields["boxes"]``).
        """
        from lucidyolo.api.accessors import Boxes

        xyxy, rest = self.fields.get("boxes"), self._conf_cls()
        if not _is_tensor(xyxy) or rest is None:
            return None
        return Boxes({"xyxy": xyxy, **rest}, self.orig_shape)

    @property
    def obb(self) -> OBB | None:
        """The rows' rotated boxes: ``.xywhr (N, 5)`` ``[cx, cy, w, h, angle]`` (pixels, radians),
        ``.xyxyxyxy (N, 4, 2)`` corners, ``.conf``, ``.cls``; None when the task gives no rotated boxes."""
        from lucidyolo.api.accessors import OBB

        rboxes, rest = self.fields.get("rboxes"), self._conf_cls()
        if not _is_tensor(rboxes) or rest is None:
            return None
        corners = self.fields.get("polygons")
        extra = {"corners": corners} if _is_tensor(corners) and tuple(corners.shape[1:]) == (4, 2) else {}
        return OBB({"xywhr": rboxes, **rest, **extra}, self.orig_shape)

    @property
    def masks(self) -> Masks | None:
        """The rows' masks: ``.data (N, H, W)`` bool image pixels, ``.xy`` N ``(K, 2)`` outlines in pixels;
        None when the task predicts no masks."""
        from lucidyolo.api.accessors import Masks

        data = self.fields.get("masks")
        return Masks({"data": data}, self.orig_shape) if _is_tensor(data) else None

    @property
    def keypoints(self) -> Keypoints | None:
        """The rows' keypoints: ``.data (N, K, 3)`` ``[x, y, confidence]``, ``.xy (N, K, 2)`` image pixels,
        ``.conf (N, K)``; None when the task predicts no keypoints."""
        from lucidyolo.api.accessors import Keypoints

        data = self.fields.get("keypoints")
        return Keypoints({"data": data}, self.orig_shape) if _is_tensor(data) else None

    @property
    def scores(self) -> Tensor | None:
        """``(N,)`` float32 confidences."""
        return self.fields.get("scores")

    @property
    def labels(self) -> Tensor | None:
        """``(N,)`` int64 class indices into :attr:`names`."""
        return self.fields.get("labels")

    @property
    def rboxes(self) -> Tensor | None:
        """``(N, 5)`` float32 rotated boxes ``[cx, cy, w, h, angle]`` (pixels, radians), when the task predicts them."""
        return self.fields.get("rboxes")

    def plot(self, channels: str = "rgb") -> np.ndarray:
        """The predictions drawn on a copy of the image by the task's ``draw`` hook, ``(H, W, 3)`` uint8.

        Args:
            channels: ``"rgb"`` (PIL's order; ``Image.fromarray(pred.plot())``) or ``"bgr"`` (OpenCV's,
                for ``cv2.imshow`` / ``cv2.imwrite``).
        """
        import numpy as np

        from lucidyolo.errors import NotAvailableError

        order = check_channels(channels, "Prediction.plot")
        if self.drawer is None:
            raise NotAvailableError("This prediction cannot be drawn: it was made without a model's draw hook.",
                                    fix="Use Model.predict(...) to get drawable predictions.")
        drawn = self.drawer(self.image, self.rows)
        rgb = np.array(drawn.convert("RGB") if hasattr(drawn, "convert") else drawn, dtype=np.uint8)
        return np.ascontiguousarray(rgb[..., ::-1]) if order == "bgr" else rgb

    def show(self) -> None:
        """Open :meth:`plot` in the system's image viewer (PIL's ``Image.show``)."""
        from PIL import Image

        Image.fromarray(self.plot()).show(title=self.default_filename())

    def default_filename(self) -> str:
        """What :meth:`save` writes without a name: ``<stem>_pred.jpg`` (``<stem>_<frame>_pred.jpg`` for a
        video frame, ``image_pred.jpg`` for an array or PIL image)."""
        stem = self.path.stem if self.path is not None else "image"
        if self.frame is not None:
            stem += f"_{self.frame:06d}"
        return f"{stem}_pred.jpg"

    def save(self, filename: str | Path | None = None, quality: int = 92) -> Path:
        """Write :meth:`plot` to ``filename`` (format from the suffix; JPEG at ``quality``, as ``lucid predict --save``).

        ``filename`` None: :meth:`default_filename` in the current directory. Returns the path written.
        """
        from PIL import Image

        from lucidyolo.atomic_write import atomic_open

        path = Path(filename) if filename is not None else Path(self.default_filename())
        path.parent.mkdir(parents=True, exist_ok=True)
        img = Image.fromarray(self.plot())
        fmt = Image.registered_extensions().get(path.suffix.lower(), "JPEG")
        with atomic_open(path, "wb") as out:
            img.save(out, format=fmt, **({"quality": quality} if fmt == "JPEG" else {}))
        return path

    def to_json(self) -> dict[str, Any]:
        """``{"image", "height", "width", "predictions"}``: one entry of ``lucid predict --output``'s ``images``.

        A dict (``json.dumps`` it for text). ``image`` is None for an array or PIL image given directly.
        """
        out = {"image": None if self.path is None else str(self.path), "height": self.height, "width": self.width,
               "predictions": self.rows}
        if self.frame is not None:
            out["frame"] = self.frame
        return json.loads(json.dumps(out))  # a deep, plain copy

    def to_df(self) -> Any:
        """A ``pandas.DataFrame`` with one row per prediction, one column per key of the task's predict dicts
        (``name``, ``label``, ``score``, ``box``... as ``to_json()["predictions"]``).

        Raises:
            NotAvailableError: pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            from lucidyolo.errors import NotAvailableError

            raise NotAvailableError("Prediction.to_df() needs pandas, which is not installed.",
                                    fix="Run `pip install pandas`, or use to_json() (plain dicts).") from None
        return pd.DataFrame(self.to_json()["predictions"])


CHANNELS = ("bgr", "rgb")
"""The channel orders a numpy image may be given or drawn in."""


def check_channels(channels: Any, where: str) -> str:
    """``channels`` lower-cased when it is ``"bgr"`` or ``"rgb"``.

    Raises:
        UserError: another value.
    """
    from lucidyolo.errors import UserError

    if isinstance(channels, str) and channels.lower() in CHANNELS:
        return channels.lower()
    raise UserError(f"{where} got channels={channels!r}.",
                    why="a numpy image's channel order is either OpenCV's (BGR) or PIL's (RGB).",
                    fix="Use channels='bgr' (cv2.imread, video frames from OpenCV) or channels='rgb'.")


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")
