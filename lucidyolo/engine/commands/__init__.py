"""The runners of the commands other than ``lucid fit`` (whose runner is the loop's ``fit.py``):
``lucid eval`` (``evaluate.py``), ``lucid predict`` (``predict.py``), ``lucid gate overfit``
(``gate.py``, which drives the loop on a synthetic slice) and ``lucid model summary`` (``summary.py``).
Each returns a report; the CLI prints it."""
