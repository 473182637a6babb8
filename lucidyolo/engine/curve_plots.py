"""Old import path of :mod:`lucidyolo.engine.run.curve_plots`, kept for plugins written before 1.0
(the plugin API documentation named it for ``plot_prefix``); it goes in the next major version."""

from lucidyolo.engine.run.curve_plots import (
    BACKGROUND_COLUMN,
    BACKGROUND_ROW,
    MAX_LEGEND,
    MAX_MATRIX_LABELS,
    PREDICTED_AXIS,
    TRUE_AXIS,
    confusion_cells,
    confusion_figure,
    confusion_values,
    curve_figures,
    plot_prefix,
    write_curve_plots,
)

__all__ = [
    "BACKGROUND_COLUMN", "BACKGROUND_ROW", "MAX_LEGEND", "MAX_MATRIX_LABELS", "PREDICTED_AXIS", "TRUE_AXIS",
    "confusion_cells", "confusion_figure", "confusion_values", "curve_figures", "plot_prefix", "write_curve_plots",
]
