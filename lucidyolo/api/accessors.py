"""Per-image views with the attribute paths users of other YOLO trainers know: ``boxes.xyxy``, ``masks.xy``...

Each view holds one image's ``N`` rows and reads the fields :class:`~lucidyolo.api.prediction.Prediction`
built from the task's predict dicts; it names no task. Indexing or iterating a view gives views of
the chosen rows (an integer keeps a leading dimension of 1, so ``box.xyxy[0]`` is the row's box).
Tensors live on the CPU; ``.cpu()`` returns the view itself for scripts that call it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

V = TypeVar("V", bound="_Rows")


class _Rows:
    """``N`` rows of named ``(N, ...)`` tensors (and per-row lists) of one image of ``orig_shape`` ``(H, W)``."""

    def __init__(self, parts: dict[str, Any], orig_shape: tuple[int, int]) -> None:
        self._parts = parts
        self.orig_shape = orig_shape

    def __len__(self) -> int:
        first = next(iter(self._parts.values()))
        return len(first)

    def __getitem__(self: V, index: Any) -> V:
        """The rows ``index`` selects (int, slice, bool mask or index tensor), as a view of the same kind."""
        import torch

        if isinstance(index, int):
            index = slice(index, index + 1 if index != -1 else None)  # keep the row dimension
        picked: dict[str, Any] = {}
        for name, value in self._parts.items():
            if isinstance(value, list):
                rows = range(len(value))
                chosen = (rows[index] if isinstance(index, slice)
                          else torch.arange(len(value))[index].reshape(-1).tolist())
                picked[name] = [value[i] for i in chosen]
            else:
                picked[name] = value[index]
        return type(self)(picked, self.orig_shape)

    def __iter__(self: V) -> Iterator[V]:
        for i in range(len(self)):
            yield self[i]

    def cpu(self: V) -> V:
        """The view itself: its tensors are on the CPU already."""
        return self

    def _normalised(self, xy: Tensor) -> Tensor:
        """``xy (..., 2k)`` pixels divided by ``(W, H)`` repeated: coordinates in ``[0, 1]``."""
        import torch

        h, w = self.orig_shape
        scale = torch.tensor([w, h], dtype=xy.dtype).repeat(xy.shape[-1] // 2)
        return xy / scale

    def __repr__(self) -> str:
        shown = ", ".join(f"{k} {tuple(v.shape)}" if hasattr(v, "shape") else f"{k} [{len(v)}]"
                          for k, v in self._parts.items())
        return f"{type(self).__name__}({len(self)} rows: {shown})"


class _Scored(_Rows):
    """Rows with a geometry, a confidence and a class: ``data`` is ``[geometry..., conf, cls]`` (float32)."""

    def _geometry(self) -> Tensor:
        raise NotImplementedError

    @property
    def conf(self) -> Tensor:
        """``(N,)`` float32 confidences."""
        return self._parts["conf"]

    @property
    def cls(self) -> Tensor:
        """``(N,)`` int64 class indices (``names[int(c)]`` is the class name)."""
        return self._parts["cls"]

    @property
    def data(self) -> Tensor:
        """``(N, G + 2)`` float32: the geometry (Boxes ``xyxy``, OBB ``xywhr``), then conf and cls."""
        import torch

        return torch.cat([self._geometry(), self.conf[:, None], self.cls[:, None].float()], dim=1)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of :attr:`data`: ``(N, 6)`` for boxes, ``(N, 7)`` for rotated boxes."""
        return (len(self), int(self._geometry().shape[-1]) + 2)


class Boxes(_Scored):
    """Axis-aligned boxes: ``xyxy (N, 4)`` float32 image pixels, ``conf (N,)`` float32, ``cls (N,)`` int64."""

    @property
    def xyxy(self) -> Tensor:
        """``(N, 4)`` float32 ``[x1, y1, x2, y2]`` in image pixels."""
        return self._parts["xyxy"]

    @property
    def xywh(self) -> Tensor:
        """``(N, 4)`` float32 ``[centre x, centre y, width, height]`` in image pixels."""
        import torch

        xyxy = self.xyxy
        return torch.cat([(xyxy[:, :2] + xyxy[:, 2:]) / 2, xyxy[:, 2:] - xyxy[:, :2]], dim=1)

    @property
    def xyxyn(self) -> Tensor:
        """``(N, 4)`` :attr:`xyxy` divided by the image's width and height."""
        return self._normalised(self.xyxy)

    @property
    def xywhn(self) -> Tensor:
        """``(N, 4)`` :attr:`xywh` divided by the image's width and height."""
        return self._normalised(self.xywh)

    def _geometry(self) -> Tensor:
        return self.xyxy


class OBB(_Scored):
    """Rotated boxes: ``xywhr (N, 5)`` ``[cx, cy, w, h, angle]`` (pixels, radians), ``conf``, ``cls``."""

    @property
    def xywhr(self) -> Tensor:
        """``(N, 5)`` float32 ``[centre x, centre y, width, height, angle]``, pixels and radians."""
        return self._parts["xywhr"]

    @property
    def xyxyxyxy(self) -> Tensor:
        """``(N, 4, 2)`` float32 corners in image pixels (from the task's polygons, else from :attr:`xywhr`)."""
        import torch

        if "corners" in self._parts:
            return self._parts["corners"]
        cx, cy, w, h, a = self.xywhr.unbind(-1)
        cos, sin = torch.cos(a), torch.sin(a)
        dx = torch.stack([w, -w, -w, w], -1) / 2  # corner offsets in the box's own frame
        dy = torch.stack([h, h, -h, -h], -1) / 2
        return torch.stack([cx[:, None] + dx * cos[:, None] - dy * sin[:, None],
                            cy[:, None] + dx * sin[:, None] + dy * cos[:, None]], -1)

    @property
    def xyxy(self) -> Tensor:
        """``(N, 4)`` float32 the axis-aligned envelope of each rotated box, image pixels."""
        import torch

        corners = self.xyxyxyxy
        if not len(corners):
            return torch.zeros((0, 4))
        return torch.cat([corners.amin(1), corners.amax(1)], dim=1)

    def _geometry(self) -> Tensor:
        return self.xywhr


class Keypoints(_Rows):
    """Keypoints: ``data (N, K, 3)`` float32 ``[x, y, confidence]`` in image pixels."""

    @property
    def data(self) -> Tensor:
        """``(N, K, 3)`` float32 ``[x, y, confidence]``."""
        return self._parts["data"]

    @property
    def xy(self) -> Tensor:
        """``(N, K, 2)`` float32 ``[x, y]`` in image pixels."""
        return self.data[..., :2]

    @property
    def xyn(self) -> Tensor:
        """``(N, K, 2)`` :attr:`xy` divided by the image's width and height."""
        return self._normalised(self.xy)

    @property
    def conf(self) -> Tensor:
        """``(N, K)`` float32 per-point confidences."""
        return self.data[..., 2]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


class Masks(_Rows):
    """Instance masks: ``data (N, H, W)`` bool in image pixels, ``xy`` their outlines."""

    @property
    def data(self) -> Tensor:
        """``(N, H, W)`` bool masks at the image's size."""
        return self._parts["data"]

    @property
    def xy(self) -> list[np.ndarray]:
        """``N`` outlines, each ``(K, 2)`` float32 ``[x, y]`` in image pixels (a mask's longest outline;
        ``(0, 2)`` for an empty mask)."""
        return [_outline(m) for m in self.data.numpy()]

    @property
    def xyn(self) -> list[np.ndarray]:
        """:attr:`xy` divided by the image's width and height."""
        import numpy as np

        h, w = self.orig_shape
        return [p / np.array([w, h], dtype=np.float32) for p in self.xy]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)


def _outline(mask: np.ndarray) -> np.ndarray:
    """The longest outline of ``mask (H, W)`` bool as ``(K, 2)`` float32 pixel ``[x, y]`` points.

    Traced at the 0.5 level between pixel centres by contourpy (a matplotlib dependency, so no
    extra package); the mask is padded by one pixel so regions touching the border close.
    """
    import numpy as np

    if not mask.any():
        return np.zeros((0, 2), dtype=np.float32)
    import contourpy

    padded = np.pad(mask.astype(np.float32), 1)
    lines = contourpy.contour_generator(z=padded, line_type=contourpy.LineType.Separate).lines(0.5)
    best = max(lines, key=len)
    return (np.asarray(best, dtype=np.float32) - 1.0).astype(np.float32)  # undo the padding
