"""Counts of a tiling run: per split and in total (the CLI's summary line and ``--json``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class SplitSummary:
    """Counts of one tiled split."""

    split: str
    scenes: int = 0
    scenes_without_labels: int = 0
    tiles: int = 0
    empty_tiles: int = 0
    empty_tiles_dropped: int = 0
    objects_in_labels: int = 0
    objects: int = 0
    difficult_by_clipping: int = 0
    dropped_degenerate: int = 0
    dropped_slivers: int = 0
    images_dir: str = ""
    ann_file: str = ""
    kept_identical: bool = False
    """Another run on the same ``out`` wrote this split first, byte-identical; its files were kept."""


@dataclass
class TileSummary:
    """Totals over all splits (the CLI's summary line / ``--json``)."""

    out: str
    splits: list[SplitSummary]
    seconds: float = 0.0
    workers: int = 0

    def total(self, key: str) -> int:
        return sum(getattr(s, key) for s in self.splits)

    def to_dict(self) -> dict[str, Any]:
        keys = ("scenes", "scenes_without_labels", "tiles", "empty_tiles", "empty_tiles_dropped", "objects_in_labels",
                "objects", "difficult_by_clipping", "dropped_degenerate", "dropped_slivers")  # fmt: skip
        return {
            "out": self.out,
            **{k: self.total(k) for k in keys},
            "seconds": round(self.seconds, 3),
            "workers": self.workers,
            "splits": [asdict(s) for s in self.splits],
        }
