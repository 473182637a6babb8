"""An annotation's ``segmentation`` of the COCO format as rings: polygon lists, or an RLE mask traced to its outline.

Format knowledge only, shared by the fields whose COCO rule reads outlines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lucidyolo.structures.polygons import Polygons
from lucidyolo.structures.rle_polygons import rle_to_rings


def ann_rings(ann: Mapping[str, Any], hw: tuple[int, int], bad: Any) -> list[np.ndarray]:
    """The rings ``(n, 2)`` float64 of an annotation's ``segmentation`` (polygon lists or an RLE mask)."""
    seg = ann.get("segmentation")
    rings: list[np.ndarray] = []
    if isinstance(seg, list):
        for ring in seg:
            arr = np.asarray(ring, dtype=np.float64)
            if arr.size >= 6 and arr.size % 2 == 0:
                if not np.all(np.isfinite(arr)):
                    raise bad("segmentation contains NaN or infinity.", "Fix or remove the annotation.")
                rings.append(arr.reshape(-1, 2))
    elif isinstance(seg, dict):
        # Non-crowd RLE (mask exports): masks travel as rings only, so trace its
        # exact pixel outlines (holes filled, see rle_polygons).
        try:
            rings = rle_to_rings(seg, hw[0], hw[1])
        except ValueError as exc:
            raise bad(f"segmentation RLE is malformed ({exc}).",
                      "Write the RLE as {'size': [height, width], 'counts': ...} of this image.") from None
    return rings


def joined_polygons(values: Sequence[list[np.ndarray]]) -> Polygons:
    """One image's rings of each annotation (``values[i]``: annotation ``i``'s rings) as one :class:`Polygons`."""
    rings = [r for rs in values for r in rs]
    owners = [i for i, rs in enumerate(values) for _ in rs]
    return Polygons.from_rings(rings, owners)
