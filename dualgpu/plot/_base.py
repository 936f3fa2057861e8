"""What every figure of :mod:`dualgpu.plot` shares: limits, colours, axes, labels and titles.

The constants are the tunable limits and colours (re-exported as ``dualgpu.plot.MAX_PIXELS``
and so on); the helpers make a headless figure, read arrays from the host or a device, and
write tick labels and titles with notes.
"""
import textwrap
import warnings

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dualgpu.errors import DualgpuError

__all__ = [
    "MAX_PIXELS", "MAX_TICK_LABELS", "MAX_LABEL_CHARS", "MAX_ANNOTATED_CELLS", "MAX_RANKED",
    "NAN_COLOR", "POSITIVE_COLOR", "NEGATIVE_COLOR", "ZERO_COLOR", "SCALES", "DIVERGING_CMAP",
    "SEQUENTIAL_CMAPS", "ROBUST_PERCENTILE", "DOMINANT_FRACTION", "LINTHRESH_PERCENTILE",
    "MAX_SYMLOG_DECADES", "NEAR_ZERO", "NOTE_WIDTH",
    "_figure_and_axes", "_as_float_array", "_is_sparse", "_check_choice", "_abs_max",
    "_entries", "_nonfinite_note", "_set_title", "_short", "_check_labels", "_label_ticks",
]

MAX_PIXELS = 800  # a matrix side longer than this is pooled into at most this many blocks
MAX_TICK_LABELS = {"x": 20, "y": 30}  # at most this many named ticks per axis
MAX_LABEL_CHARS = 24  # longer tick labels are shortened with an ellipsis
MAX_ANNOTATED_CELLS = 100  # Jacobians this small get their values written in the cells
MAX_RANKED = 30  # parameter_ranking shows at most this many bars unless told otherwise
NAN_COLOR = "#2ca02c"  # green: absent from the colour maps used here
POSITIVE_COLOR = "#b2182b"  # the red end of RdBu_r
NEGATIVE_COLOR = "#2166ac"  # the blue end of RdBu_r
ZERO_COLOR = "0.6"  # grey: a parameter with no effect
SCALES = ("linear", "symlog")
DIVERGING_CMAP = "RdBu_r"  # data of both signs: blue, white at zero, red
SEQUENTIAL_CMAPS = {1: "Reds", -1: "Blues_r"}  # all >= 0: white to red; all <= 0: blue to white
ROBUST_PERCENTILE = 99.0  # robust=True clips the colour scale at this percentile of |nonzero|
DOMINANT_FRACTION = 0.1  # robust=True is suggested when that percentile is below this x max
LINTHRESH_PERCENTILE = 10.0  # symlog: linear within this percentile of |nonzero values| ...
MAX_SYMLOG_DECADES = 8  # ... but at most this many decades below the largest magnitude
NEAR_ZERO = 1e-2  # elasticities are not shown when |output| < NEAR_ZERO x its scale
NOTE_WIDTH = 72  # title notes are wrapped at this many characters


def _figure_and_axes(ax, figsize):
    """Return ``(fig, ax)``: the given axes and its figure, or a new headless figure."""
    if ax is not None:
        try:
            return ax.get_figure(root=True), ax
        except TypeError:  # matplotlib < 3.10
            return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _as_float_array(data, what):
    """Return ``data`` as a float ndarray on the host (device arrays are copied back)."""
    if hasattr(data, "copy_to_host"):  # numba device array
        data = data.copy_to_host()
    elif type(data).__module__.startswith("cupy"):  # cupy array
        data = data.get()
    try:
        array = np.asarray(data, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DualgpuError(
            f"{what} must be an array of real numbers; got {type(data).__name__} ({exc}). "
            "For dual numbers pass their .value or .partials."
        ) from None
    return array


def _is_sparse(data):
    return type(data).__module__.startswith("scipy.sparse") and hasattr(data, "tocoo")


def _check_choice(name, value, choices):
    if value not in choices:
        raise DualgpuError(f"{name} must be one of {choices}; got {value!r}.")


def _abs_max(finite_values):
    """Return the largest magnitude among ``finite_values``, or 0.0 when there are none."""
    return float(np.max(np.abs(finite_values))) if finite_values.size else 0.0


def _entries(count):
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _nonfinite_note(values, what, how):
    """Return a title note on NaN/inf entries of ``values`` (with a warning), or ''.

    ``how`` says what became of them, e.g. "shown in green" or "left out".
    """
    count = int(np.count_nonzero(~np.isfinite(values)))
    if not count:
        return ""
    entries = f"entr{'y' if count == 1 else 'ies'}"
    warnings.warn(f"{what} has {count} NaN or infinite {entries}; they are {how}.",
                  RuntimeWarning, stacklevel=3)
    return f"{count} NaN/inf {entries} {how}"


def _set_title(ax, title, notes):
    """Title the axes, with each note in parentheses on lines of its own (wrapped when long)."""
    notes = [textwrap.fill(f"({note})", NOTE_WIDTH) for note in notes if note]
    ax.set_title("\n".join([title] + notes))


def _short(label):
    label = str(label)
    return label if len(label) <= MAX_LABEL_CHARS else label[: MAX_LABEL_CHARS - 1] + "…"


def _check_labels(labels, count, name, meaning):
    if labels is None:
        return None
    labels = [str(label) for label in labels]
    if len(labels) != count:
        raise DualgpuError(
            f"{name} must hold one label per {meaning}: expected {count}, got {len(labels)}. "
            f"Pass {count} labels, or leave {name}=None to number them."
        )
    return labels


def _label_ticks(axis, labels, rotate):
    """Name the ticks of ``axis`` with ``labels``, thinned to MAX_TICK_LABELS, rotated if x."""
    most = MAX_TICK_LABELS[axis.axis_name]
    positions = np.unique(np.linspace(0, len(labels) - 1, min(len(labels), most)).round())
    positions = positions.astype(int)
    axis.set_ticks(positions, [_short(labels[i]) for i in positions])
    if len(positions) > 12:
        axis.set_tick_params(labelsize=8)
    if rotate and (len(positions) > 8 or max(len(labels[i]) for i in positions) > 3):
        axis.set_tick_params(labelrotation=45)
        for text in axis.get_ticklabels():
            text.set_horizontalalignment("right")
            text.set_rotation_mode("anchor")
