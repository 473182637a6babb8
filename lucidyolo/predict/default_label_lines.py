"""``lucid predict --save-txt`` for a task without its own ``label_lines`` hook: the field's YOLO row rule.

A task's YOLO reader already knows how a row is written (:attr:`YoloRows.write
<lucidyolo.structures.field_io.YoloRows.write>`), so the row of a prediction is
that rule applied to the prediction's values: the ``predict`` dicts carry each
attribute of the field under its own name (``"point": [x, y]`` in original
pixels), ``"box"`` (xyxy pixels) where the task has boxes, ``"label"`` and
``"score"``. A task without a written field but with boxes gets the detection
row ``label cx cy w h``. The lines read back through the same reader once the
confidence column is dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.errors import NotAvailableError
from lucidyolo.predict.label_lines import box_lines, format_line
from lucidyolo.structures.fields import FieldSpec, field_specs


def default_label_lines(task: str, fields: tuple[str, ...], boxes: bool) -> Callable[..., list[str]] | None:
    """The ``label_lines`` of a task without the hook: its first field with a YOLO row writer (a ragged
    attribute, polygons, needs the task's own hook), else the box row where the task has boxes; ``None``."""
    writers = [f for f in field_specs(fields) if f.yolo is not None and f.yolo.write is not None
               and not any(a.ragged for a in f.attrs)]
    if writers:
        return functools.partial(_field_lines, writers[0], task)
    if boxes and not [f for f in field_specs(fields) if f.yolo is not None]:
        return _box_lines
    return None


def _box_lines(predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int], **_: Any) -> list[str]:
    return box_lines(predictions, image_hw)


def _field_lines(field: FieldSpec, task: str, predictions: Sequence[Mapping[str, Any]], image_hw: tuple[int, int],
                 meta: Mapping[str, Any] | None = None, **_: Any) -> list[str]:
    """One image's ``predict`` dicts as ``label <the field's row> conf`` lines (``image_hw = (h, w)``)."""
    if not predictions:
        return []
    missing = sorted({a.name for a in field.attrs if not a.per_image} - set(predictions[0]))
    if missing:
        raise NotAvailableError(
            f"`lucid predict --save-txt` for task {task!r} cannot write its rows: the predictions carry no "
            f"{', '.join(repr(m) for m in missing)}.",
            why=f"without a label_lines hook, a row is the {field.name!r} field's YOLO rule applied to the values "
                "each prediction carries under the field's attribute names.",
            fix="Run without --save-txt (--output FILE writes every prediction as JSON), or give the plugin a "
                "label_lines hook.",
        )
    values = {a.name: np.asarray([p[a.name] for p in predictions], np.dtype(a.dtype))
              for a in field.attrs if not a.per_image}
    boxes = np.array([p.get("box", (0.0, 0.0, 0.0, 0.0)) for p in predictions], np.float64).reshape(-1, 4)
    assert field.yolo is not None and field.yolo.write is not None
    rows = field.yolo.write(values, boxes, image_hw, dict(meta or {}))
    return [format_line(int(p["label"]), row, float(p["score"])) for p, row in zip(predictions, rows, strict=True)]
