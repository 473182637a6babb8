"""Which library scores COCO results: pycocotools or faster-coco-eval.

Both implement the same protocol (greedy matching per image and category,
101-point interpolated precision, area ranges, crowd regions); faster-coco-eval
runs ``evaluate`` and ``accumulate`` in C++ and is several times faster on a
COCO-size split (``benchmarks/eval.py`` measures it). ``auto`` takes it when it
is installed and pycocotools otherwise; parity to 1e-6 on ``bbox``, ``segm``
and ``keypoints`` is a test (``tests/metrics/test_coco_backend.py``).

The choice is a property of one command (``lucid eval --coco-backend``), not of
a task, so it travels as a context variable around the task's ``evaluate``
hook instead of through every hook's signature.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
from collections.abc import Iterator
from typing import Any

from lucidyolo.errors import UserError

BACKENDS: tuple[str, ...] = ("auto", "pycocotools", "faster_coco_eval")
"""The accepted names; ``auto`` resolves to one of the other two."""

_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("coco_backend", default="auto")


def faster_available() -> bool:
    """Whether ``faster_coco_eval`` can be imported (found, not imported: it costs ~0.1 s)."""
    return importlib.util.find_spec("faster_coco_eval") is not None


def resolve_backend(name: str | None = None) -> str:
    """The concrete backend for ``name`` (``None``: the one set by :func:`using_backend`, else ``auto``).

    Raises:
        UserError: an unknown name, or ``faster_coco_eval`` asked for but not installed.
    """
    name = _CURRENT.get() if name is None else name
    if name not in BACKENDS:
        raise UserError(
            f"Unknown COCO scoring backend {name!r}.",
            fix=f"Use one of {', '.join(BACKENDS)}.",
        )
    if name == "auto":
        return "faster_coco_eval" if faster_available() else "pycocotools"
    if name == "faster_coco_eval" and not faster_available():
        raise UserError(
            "The COCO scoring backend faster_coco_eval is not installed.",
            why="it is an optional dependency.",
            fix="Install it with `pip install 'lucidyolo[fast-eval]'`, or use --coco-backend pycocotools.",
        )
    return name


@contextlib.contextmanager
def using_backend(name: str) -> Iterator[str]:
    """Score every COCO evaluation inside the block with ``name``; yields the resolved backend."""
    resolved = resolve_backend(name)
    token = _CURRENT.set(resolved)
    try:
        yield resolved
    finally:
        _CURRENT.reset(token)


def coco_classes(backend: str) -> tuple[Any, Any]:
    """``(COCO, COCOeval)`` classes of a resolved backend; both share pycocotools' interface."""
    if backend == "faster_coco_eval":
        from faster_coco_eval import COCO, COCOeval_faster

        return COCO, COCOeval_faster
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    return COCO, COCOeval
