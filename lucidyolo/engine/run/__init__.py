"""The run folder and its reporting: the folder policy (``run_dir.py``: naming, claiming, ``config.yaml``),
``results.csv`` and the loggers' files, the console's epoch lines, the label statistics and their plots,
the batch pictures, the metric curves and their plots (``best_curves.py`` redraws those of the best
epoch), and the slim ``weights.pt`` a finished fit leaves. Nothing here drives training."""
