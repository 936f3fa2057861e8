"""Figures for derivatives: Jacobian heatmaps, sensitivity fields, rankings and histories.

Every function draws on a :class:`matplotlib.figure.Figure` with an Agg canvas, so it works
headless and never touches pyplot's state or backend. Each takes an optional ``ax`` to draw
into and returns ``(fig, ax)``; :func:`save` writes the figure as a PNG.

Colour scales keep white for zero. Data of both signs get a diverging scale centred at zero
(red positive, blue negative); data that are all non-negative (a concentration, an
all-positive Jacobian) a sequential one from white to red, all non-positive from blue to
white. ``robust=True`` clips the colour scale at the 99th percentile of the magnitudes when
a few entries dominate (the title says so, and suggests it when it would help). Symlog
scales take their linear range from the data. Entries that are NaN or infinite are drawn in
a colour of their own (green by default), and the title and a :class:`RuntimeWarning` say
how many there are.

The figures: :func:`jacobian_heatmap` (a Jacobian), :func:`sensitivity_field` (a
derivative over a 1-D or 2-D field), :func:`parameter_ranking` and :func:`elasticities`
(which parameter matters most), :func:`sensitivity_over_time` (derivatives along a run),
:func:`dgsm_bars` and :func:`dgsm_maps` (a global sensitivity analysis), and :func:`save`
to write any of them; the limits and colours (``MAX_PIXELS``, ``NAN_COLOR``...) are named
here too.
``import dualgpu`` does not import matplotlib: ``dualgpu.plot`` is imported on first use.

Examples
--------
>>> import numpy as np
>>> from dualgpu import plot
>>> J = np.array([[1.0, -2.0], [0.5, 0.0]])
>>> fig, ax = plot.jacobian_heatmap(J, input_labels=["a", "b"], output_name="y")
>>> norm = ax.images[0].norm
>>> float(norm.vmin), float(norm.vmax)
(-2.0, 2.0)
>>> ax.get_title()
'Jacobian ∂ y / ∂ input  (2 × 2)'
"""
from dualgpu.plot._base import (  # noqa: F401  (the limits and colours, named here)
    DIVERGING_CMAP, DOMINANT_FRACTION, LINTHRESH_PERCENTILE, MAX_ANNOTATED_CELLS,
    MAX_LABEL_CHARS, MAX_PIXELS, MAX_RANKED, MAX_SYMLOG_DECADES, MAX_TICK_LABELS, NAN_COLOR,
    NEAR_ZERO, NEGATIVE_COLOR, NOTE_WIDTH, POSITIVE_COLOR, ROBUST_PERCENTILE, SCALES,
    SEQUENTIAL_CMAPS, ZERO_COLOR,
)
from dualgpu.plot.dgsm import dgsm_bars, dgsm_maps
from dualgpu.plot.fields import sensitivity_field
from dualgpu.plot.history import sensitivity_over_time
from dualgpu.plot.jacobian import jacobian_heatmap
from dualgpu.plot.output import save
from dualgpu.plot.parameters import elasticities, parameter_ranking

__all__ = [
    "jacobian_heatmap",
    "sensitivity_field",
    "parameter_ranking",
    "sensitivity_over_time",
    "elasticities",
    "save",
    "dgsm_bars",
    "dgsm_maps",
]
