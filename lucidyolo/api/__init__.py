"""The Python API: :class:`Model` and what its methods return.

``from lucidyolo import Model`` is the short form. Importing this package is
cheap (no torch); torch and Lightning load when a model is built, trained or run.
"""

from lucidyolo.api.model import Model
from lucidyolo.api.prediction import Prediction
from lucidyolo.api.results import EvalReport, ExportResult, FitResult

__all__ = ["EvalReport", "ExportResult", "FitResult", "Model", "Prediction"]
