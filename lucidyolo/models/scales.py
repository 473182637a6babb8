"""The variant table: every YOLO26 size is one row of data, not a class.

Channels of a layer with base width ``c`` are ``int(min(c, mc) * w)``; repeats
of a block with base count ``n`` are ``max(1, round(n * d))``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lucidyolo.errors import ConfigError


@dataclass(frozen=True)
class Scale:
    """One row of the scale table.

    Attributes:
        depth: depth multiplier ``d``.
        width: width multiplier ``w``.
        max_channels: base-width cap ``mc`` applied before the width multiplier.
        c3k_early: the two early backbone C3k2 (strides 4 and 8) chain C3k inner
            units instead of Bottlenecks (m, l, x: the published layout).
    """

    depth: float
    width: float
    max_channels: int
    c3k_early: bool = False

    def channels(self, base: int) -> int:
        """Channels of a layer with base width ``base``."""
        return int(min(base, self.max_channels) * self.width)

    def repeats(self, base: int) -> int:
        """Repeats of a block with base count ``base``."""
        return max(1, round(base * self.depth))


SCALES: dict[str, Scale] = {
    "n": Scale(depth=0.50, width=0.25, max_channels=1024),
    "s": Scale(depth=0.50, width=0.50, max_channels=1024),
    "m": Scale(depth=0.50, width=1.00, max_channels=512, c3k_early=True),
    "l": Scale(depth=1.00, width=1.00, max_channels=512, c3k_early=True),
    "x": Scale(depth=1.00, width=1.50, max_channels=512, c3k_early=True),
}


def variant_key(variant: str) -> str:
    """The scale-table row of ``variant`` (``"n"`` for ``n``, ``N`` or ``yolo26n``).

    Raises:
        ConfigError: no row of that name.
    """
    key = variant.lower().removeprefix("yolo26")
    if key not in SCALES:
        raise ConfigError(
            f"Unknown model variant {variant!r}.",
            why="variants are rows of the scale table.",
            fix=f"use one of {', '.join(SCALES)} (or {', '.join(f'yolo26{v}' for v in SCALES)}).",
        )
    return key
