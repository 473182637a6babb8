"""lucid-yolo: an independent PyTorch Lightning implementation of the YOLO26 family.

Importing this package is cheap: it imports neither torch nor Lightning. Heavy
modules (``lucidyolo.models``, ``lucidyolo.engine``, ...) are imported by the
code that needs them. ``from lucidyolo import Model`` (the Python API,
:mod:`lucidyolo.api`) is resolved on first use and stays torch-free until a
model is built, trained or run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lucidyolo._version import __version__

if TYPE_CHECKING:
    from lucidyolo.api import EvalReport, ExportResult, FitResult, Model, Prediction

__all__ = ["EvalReport", "ExportResult", "FitResult", "Model", "Prediction", "__version__"]

_API = frozenset({"EvalReport", "ExportResult", "FitResult", "Model", "Prediction"})


def __getattr__(name: str) -> Any:
    """``lucidyolo.Model`` and the API's result types, imported from :mod:`lucidyolo.api` on first access."""
    if name in _API:
        import lucidyolo.api as api

        return getattr(api, name)
    raise AttributeError(f"module 'lucidyolo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
