"""The built-in dual-head family (one-to-one + one-to-many branches): detection is its base.

:mod:`~lucidyolo.tasks.dual_head.config` holds the family's ``model`` section and
decode paths; :mod:`~lucidyolo.tasks.dual_head.family` builds a task of the family
from its hooks module and what differs from detection. Torch-free.
"""

from lucidyolo.tasks.dual_head.config import DECODE_PATHS, INFERENCE_VIEW, DualHeadModelConfig
from lucidyolo.tasks.dual_head.family import SyntheticSet, dual_head_task

__all__ = ["DECODE_PATHS", "INFERENCE_VIEW", "DualHeadModelConfig", "SyntheticSet", "dual_head_task"]
