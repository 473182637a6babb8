"""The synthetic scene of the polygon field: the shapes, with YOLO rows that are their outlines (a :class:`SyntheticScene`).

The drawing and the COCO annotations (which always carry the outline as
``segmentation``) are the default shapes scene's; only the YOLO row differs:
``x1 y1 ... xn yn`` of the outline clipped to the image instead of its box.
"""

from __future__ import annotations

from dataclasses import replace

from lucidyolo.data.synth import SHAPES
from lucidyolo.data.synth_scene import ring_row

SCENE = replace(SHAPES, yolo_row=ring_row)
