"""Where lucid keeps what it makes for the user: ``$LUCIDYOLO_CACHE_DIR`` or the platformdirs user cache.

Synthetic sets, downloads and the label index live below it. Torch-free.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$LUCIDYOLO_CACHE_DIR`` when set, else the platformdirs user cache of ``lucidyolo``."""
    env = os.environ.get("LUCIDYOLO_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("lucidyolo"))
