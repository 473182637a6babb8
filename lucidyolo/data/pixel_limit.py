"""``data.max_image_pixels``: the most pixels an image file may declare before lucid decodes it.

A small file can declare a 900-megapixel image (a "decompression bomb") whose
decode would take gigabytes; :mod:`lucidyolo.data.image_io` refuses such a file
from its header, as a bad file. Torch-, numpy- and Pillow-free: the config
schema takes its default from here.
"""

from __future__ import annotations

import os

#: Default of ``data.max_image_pixels``: Pillow's own hard limit (2 x its warning limit of
#: 89,478,485), about 179 megapixels (13377 x 13377), so every image lucid read before the key
#: existed is still read. Decoded to RGB such an image takes 537 MB.
DEFAULT_MAX_IMAGE_PIXELS = 178_956_970
#: Carries a set limit to the processes this one starts (loader workers started by spawn re-import
#: this module, DDP ranks), which would otherwise fall back to the default.
LIMIT_ENV = "LUCID_MAX_IMAGE_PIXELS"
_limit: int | None = None  # None: the environment's value, else the default


def set_max_image_pixels(limit: int) -> None:
    """Refuse images of more than ``limit`` pixels from now on, in this process and the ones it starts.

    ``lucid fit`` calls it with ``data.max_image_pixels`` before it reads a split.
    """
    global _limit
    _limit = int(limit)
    os.environ[LIMIT_ENV] = str(_limit)


def max_image_pixels() -> int:
    """The limit in force: the last :func:`set_max_image_pixels`, else ``LUCID_MAX_IMAGE_PIXELS``, else the default."""
    if _limit is not None:
        return _limit
    env = os.environ.get(LIMIT_ENV, "")
    return int(env) if env.isdigit() and int(env) > 0 else DEFAULT_MAX_IMAGE_PIXELS
