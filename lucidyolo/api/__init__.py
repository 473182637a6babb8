"""The Python API: :class:`Model` and what its methods return.

``from lucidyolo import Model`` is the short form. Importing this package is
cheap (no torch); torch and Lightning load when a model is built, trained or run.
"""

from lucidyolo.api.accessors import OBB, Boxes, Keypoints, Masks
from lucidyolo.api.model import Model
from lucidyolo.api.prediction import Prediction
from lucidyolo.api.results import EvalReport, ExportResult, FitResult, MetricFamily

__all__ = ["OBB", "Boxes", "EvalReport", "ExportResult", "FitResult", "Keypoints", "Masks", "MetricFamily", "Model",
           "Prediction"]
