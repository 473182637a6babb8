"""The names of the dataset layouts the built-in readers know (torch-free: the config schema lists them).

:mod:`lucidyolo.data.layouts` probes them in this order for the COCO container;
``coco`` is any of the four, ``yolo`` and ``dota`` their own families.
"""

from __future__ import annotations

COCO_LAYOUTS = ("coco-2017", "coco-split", "coco-images", "coco-export")
LAYOUTS = (*COCO_LAYOUTS, "coco", "yolo", "dota")
