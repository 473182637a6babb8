"""DOTA-v1.0: the ``labelTxt`` reader and the scene tiler behind ``lucid data tile dota``.

* :mod:`~lucidyolo.data.dota.reader`: ``labelTxt`` parsing, the 15 DOTA-v1.0
  classes, ``read_dota`` and its fit-time check against whole scenes.
* :mod:`~lucidyolo.data.dota.tiler`: ``tile_dota``, cutting scenes into a COCO
  container of tiles; its steps live in ``windows``, ``clip``, ``scene``,
  ``splits``, ``staging`` and ``summary``.

No imports here: reading a DOTA split must not pull in shapely and the tiler.
"""
