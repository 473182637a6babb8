"""How a field reads from and writes to label files: the codec rules a :class:`~lucidyolo.structures.fields.FieldSpec` may carry.

A reader of a file format knows the format's frame (YOLO: a ``data.yaml``, one
text file per image, one row per instance starting with the class id); the
field knows what its part of a row means. The YOLO reader
(:mod:`lucidyolo.data.yolo`) therefore hands each row's numbers to the one
field of the task that has a :class:`YoloRows` rule, and reads plain box rows
when none has. A field declared by a task that no rule of the reader fills
(and that has no ``fill_missing`` attribute) is refused, naming the field and
the file: it is never trained on zeros.

Numpy only; rules run at read time, never in a training step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RowRead = Callable[..., tuple["np.ndarray | None", dict[str, Any]]]


@dataclass(frozen=True)
class YoloRows:
    """A field's YOLO label row (the numbers after the class id).

    Attributes:
        kind: what such a row is called in messages (``"pose"``: "pose rows need ...").
        need: ``need(meta) -> str``: what a row must hold, for messages
            (``"56 fields (c cx cy w h + 17 x 3)"``).
        accepts: ``accepts(count, meta) -> bool``: whether a row with ``count``
            numbers after the class id has this format.
        read: ``read(rows, hw, meta, where) -> (boxes, values)``: ``rows`` the
            accepted rows of one file, each a ``(T,)`` float64 array of
            normalised numbers (finite, within ``[-2, 2]``; the reader checked
            them), ``hw = (h, w)`` the image size, ``where`` each row's
            ``file:line``. Returns ``boxes (N, 4)`` float xyxy pixels (``None``:
            the row holds no box; the instances of such a task carry none) and
            the field's attributes by name (``(N, ...)`` arrays). Raises
            :class:`~lucidyolo.errors.DataError` naming ``where[i]`` for a row
            it refuses. Boxes with no area are dropped by the reader.
        write: ``write(values, boxes, hw, meta) -> list[list[float]]``: the
            normalised numbers of each instance's row (without the class id);
            ``None``: the field cannot be written as YOLO rows.
        meta: ``meta(yaml, yaml_path) -> dict``: the dataset meta the field
            reads from ``data.yaml`` (``kpt_shape: [17, 3]`` gives
            ``num_keypoints`` and the row width). It raises
            :class:`~lucidyolo.errors.DataError` when a key it needs is
            missing or malformed. ``None``: the field needs no meta.
        declares: ``declares(yaml) -> bool``: the yaml itself says its rows
            have this format (a ``kpt_shape`` key); ``lucid data check``
            uses it to guess a root's task. ``None``: only the rows tell.
    """

    kind: str
    need: Callable[[Mapping[str, Any]], str]
    accepts: Callable[[int, Mapping[str, Any]], bool]
    read: RowRead
    write: Callable[..., list[list[float]]] | None = None
    meta: Callable[[Mapping[str, Any], Path], dict[str, Any]] | None = None
    declares: Callable[[Mapping[str, Any]], bool] | None = None


def xy_scale(hw: tuple[int, int]) -> np.ndarray:
    """``(2,)`` float64 ``(w, h)`` of an image ``hw = (h, w)``: multiplies normalised ``x, y`` into pixels."""
    return np.array([hw[1], hw[0]], np.float64)


def stack_rows(rows: Sequence[np.ndarray], width: int) -> np.ndarray:
    """Rows of one width as ``(N, width)`` float64 (``(0, width)`` for none)."""
    return np.stack(rows).astype(np.float64) if rows else np.zeros((0, width), np.float64)


def cxcywh_to_xyxy(b: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """Normalised ``(N, 4)`` ``cx cy w h`` rows as ``(N, 4)`` xyxy pixels."""
    scale = np.array([hw[1], hw[0]], np.float64)
    cxcy, wh = b[:, :2] * scale, b[:, 2:4] * scale
    return np.concatenate([cxcy - wh / 2, cxcy + wh / 2], 1)


def xyxy_to_cxcywh(boxes: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """``(N, 4)`` xyxy pixels as normalised ``cx cy w h`` (the inverse of :func:`cxcywh_to_xyxy`)."""
    scale = np.array([hw[1], hw[0], hw[1], hw[0]], np.float64)
    b = np.asarray(boxes, np.float64)
    return np.concatenate([(b[:, :2] + b[:, 2:]) / 2, b[:, 2:] - b[:, :2]], 1) / scale


@dataclass(frozen=True)
class CocoRule:
    """A field's part of a COCO annotation file (read by :mod:`lucidyolo.data.coco`, written by :mod:`lucidyolo.data.coco_gt`).

    Attributes:
        read: ``read(ann, hw, meta, crowd, bad) -> value | None``: one
            annotation's value for the field (any object :attr:`join` takes);
            ``None`` drops the annotation from the task (a polygon task's
            annotation without a ring). ``crowd`` is True for an ``iscrowd``
            region kept as an ignore region; ``bad(what, fix)`` builds the
            :class:`~lucidyolo.errors.DataError` naming the annotation.
        join: ``join(values, boxes, meta) -> attributes``: one image's values
            (one per kept annotation) and their ``boxes (N, 4)`` float32 xyxy px
            as the field's attributes.
        categories: ``categories(cats, ann_file) -> (cats, meta)``: the
            categories the field can be read from (pose: those naming
            keypoints; raise ``DataError`` for none) and the dataset meta they
            give (K, flip pairs, skeleton). ``None``: every category, no meta.
        ann_prefix: the annotation file name's prefix under the COCO
            conventions (``person_keypoints``); ``None``: ``instances``.
        write: ``write(values, n, meta) -> list[dict]``: for each of one image's
            ``n`` instances (its attributes ``values``), the annotation keys the
            field adds (``segmentation``, ``keypoints``, an ``area`` that
            replaces the box's).
        write_category: ``write_category(meta) -> dict``: keys every written
            category carries (pose: ``keypoints`` names, ``skeleton``).
        box: the annotation's ``bbox`` is the instance's box (required). False: the
            field's instances have no box (points; ``TaskSpec.boxes`` False): ``bbox``
            is neither needed nor read, :attr:`read` alone keeps or drops an
            annotation and the instance carries a zero box.
    """

    read: Callable[..., Any]
    join: Callable[[Sequence[Any], np.ndarray, Mapping[str, Any]], dict[str, Any]]
    categories: Callable[[list[dict[str, Any]], Path], tuple[list[dict[str, Any]], dict[str, Any]]] | None = None
    ann_prefix: str | None = None
    write: Callable[[Mapping[str, Any], int, Mapping[str, Any]], list[dict[str, Any]]] | None = None
    write_category: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    box: bool = True
