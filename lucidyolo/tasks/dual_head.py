"""What the built-in tasks' dual-head (one-to-one + one-to-many) models share at inference.

Torch-free (spec modules import it): the decode paths each built-in task
declares and the inference view that serves them.
"""

from __future__ import annotations

from lucidyolo.tasks.api import lazy_hook

DECODE_PATHS: tuple[str, ...] = ("e2e", "nms")
"""``e2e``: the one-to-one branch's top-k, NMS-free (the default: validation, ``lucid predict``, the
exported graph); ``nms``: the one-to-many branch with non-maximum suppression (``lucid eval`` scores both)."""

INFERENCE_VIEW = lazy_hook("lucidyolo.models.inference_view:inference_model")
"""``e2e`` alone runs the deployed trunk and o2o branch (BN folded, no o2m branch); with ``nms`` the
whole BN-folded model (the o2m branch feeds NMS)."""
