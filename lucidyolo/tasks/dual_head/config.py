"""What the built-in tasks' dual-head (one-to-one + one-to-many) models share: options, decode paths, inference view.

Torch-free (spec modules import it): the model config section of the dual
head (loss gains of each branch, the assigners' top-k, the progressive
o2m/o2o weight's end points), the decode paths each
built-in task declares and the inference view that serves them. A plugin
whose model has no such head derives its config from the plain
:class:`~lucidyolo.config.schema.ModelConfig` and so has none of these keys
(``--model.box_gain`` on it is an unknown key, exit code 2).
"""

from __future__ import annotations

from pydantic import Field

from lucidyolo.config.schema import ModelConfig
from lucidyolo.tasks.api import lazy_hook


class DualHeadModelConfig(ModelConfig):
    """The ``model`` options of a dual-head task (spec 30-objective): each branch's loss gains and top-k."""

    box_gain: float = Field(7.5, ge=0)
    cls_gain: float = Field(0.5, ge=0)
    l1_gain: float = Field(6.0, ge=0)
    o2m_topk: int = Field(10, gt=0)
    o2o_topk: int = Field(7, gt=0)
    alpha_start: float = Field(0.8, ge=0, le=1, description="o2m weight of the dual loss at the first epoch")
    alpha_end: float = Field(0.1, ge=0, le=1, description="o2m weight at the last epoch (linear in between)")
    class_width: int | None = Field(
        None, ge=1, description=("classes the class towers are sized for (published rule: width max(C3, min(classes, 100))); "
                                 "None = this run's classes; a run started from weights of more classes takes theirs"))


DECODE_PATHS: tuple[str, ...] = ("e2e", "nms")
"""``e2e``: the one-to-one branch's top-k, NMS-free (the default: validation, ``lucid predict``, the
exported graph); ``nms``: the one-to-many branch with non-maximum suppression (``lucid eval`` scores both)."""

INFERENCE_VIEW = lazy_hook("lucidyolo.models.inference_view:inference_model")
"""``e2e`` alone runs the deployed trunk and o2o branch (BN folded, no o2m branch); with ``nms`` the
whole BN-folded model (the o2m branch feeds NMS)."""
