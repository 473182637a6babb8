"""lucid-yolo: an independent PyTorch Lightning implementation of the YOLO26 family.

Importing this package is cheap: it imports neither torch nor Lightning. Heavy
modules (``lucidyolo.models``, ``lucidyolo.engine``, ...) are imported by the
code that needs them.
"""

from lucidyolo._version import __version__

__all__ = ["__version__"]
