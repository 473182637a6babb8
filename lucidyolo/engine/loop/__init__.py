"""The training loop: ``lucid fit``'s runner (``fit.py``), the builders that turn the config into plain
arguments (``build.py``: model, data, optimiser), the Lightning module and data module, the trainer
factory, and the callbacks that act on the loop itself (checkpointing, EMA, layer freezing, the warning on
an epoch without instances). What the loop writes into the run folder is ``engine/run/``; what it loads
and saves as weights is ``engine/weights/``."""
