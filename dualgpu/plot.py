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
import textwrap
import warnings
from pathlib import Path

import numpy as np
from matplotlib import colormaps, colors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from dualgpu.errors import DualgpuError

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


# ---------------------------------------------------------------- shared helpers

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


def _robust_percentile(robust):
    """Return the clipping percentile for ``robust`` (False/None: no clipping)."""
    if robust is None or robust is False:
        return None
    if robust is True:
        return ROBUST_PERCENTILE
    if isinstance(robust, (int, float, np.number)) and 50 <= float(robust) < 100:
        return float(robust)
    raise DualgpuError(
        f"robust must be True (clip the colour scale at the {ROBUST_PERCENTILE:g}th percentile "
        f"of the magnitudes), False, or a percentile from 50 to 100; got {robust!r}."
    )


def _entries(count):
    return f"{count} entr{'y' if count == 1 else 'ies'}"


class _Scale:
    """What a colour (or y) scale shows: sign of the data, the limit, notes for the title."""

    def __init__(self, values, scale, linthresh, robust, what="colour scale"):
        _check_choice("scale", scale, SCALES)
        finite = values[np.isfinite(values)]
        magnitudes = np.abs(finite[finite != 0])
        self.vmax = float(magnitudes.max()) if magnitudes.size else 0.0
        self.notes = []
        limit = self.vmax
        percentile = _robust_percentile(robust)
        self.clipped = False
        if percentile is not None and magnitudes.size:
            limit = float(np.percentile(magnitudes, percentile))
            beyond = int(np.count_nonzero(magnitudes > limit))
            if beyond:
                self.clipped = True
                self.notes.append(
                    f"robust {what}: clipped at ±{limit:.3g}, the {percentile:g}th percentile of "
                    f"|nonzero values|; {_entries(beyond)} beyond it drawn at the ends")
        elif percentile is None and _dominated(magnitudes, self.vmax):
            self.notes.append(
                f"a few entries dominate the {what}: robust=True clips it at the "
                f"{ROBUST_PERCENTILE:g}th percentile")
        if self.vmax > 0 and finite.min() >= 0:
            self.sign = 1
        elif self.vmax > 0 and finite.max() <= 0:
            self.sign = -1
        else:
            self.sign = 0  # both signs, or all zero
        self.limit = limit if limit > 0 else 1.0  # all zero: any range shows plain white
        self.linthresh = None
        if scale == "symlog":
            self.linthresh = _linthresh(linthresh, self.limit, magnitudes)
            self.notes.append(f"symlog {what}, linear within ±{self.linthresh:.2g}")
        self.scale = scale

    def norm(self):
        """The matplotlib norm: symmetric around zero, or from zero for one-signed data."""
        low = -self.limit if self.sign <= 0 else 0.0
        high = self.limit if self.sign >= 0 else 0.0
        if self.scale == "symlog":
            return colors.SymLogNorm(linthresh=self.linthresh, linscale=1.0, vmin=low,
                                     vmax=high, base=10)
        if self.sign == 0:
            return colors.TwoSlopeNorm(vcenter=0.0, vmin=low, vmax=high)
        return colors.Normalize(vmin=low, vmax=high)

    def cmap(self, cmap):
        """The colormap: ``cmap`` if one was given, else diverging or sequential by sign."""
        if cmap is not None:
            return cmap
        return SEQUENTIAL_CMAPS.get(self.sign, DIVERGING_CMAP)

    def extend(self):
        """Which colorbar ends are clipped (arrow-shaped)."""
        if not self.clipped:
            return "neither"
        return {1: "max", -1: "min"}.get(self.sign, "both")


def _dominated(magnitudes, vmax):
    """True when a few entries set the scale: the 99th percentile is far below the maximum."""
    if magnitudes.size < 20 or vmax == 0:
        return False
    return float(np.percentile(magnitudes, ROBUST_PERCENTILE)) < DOMINANT_FRACTION * vmax


def _linthresh(linthresh, vmax, magnitudes=None):
    """Return the symlog linear range: ``linthresh`` checked, or one taken from the data.

    The default is the ``LINTHRESH_PERCENTILE``-th percentile of the nonzero magnitudes,
    kept within ``MAX_SYMLOG_DECADES`` decades below ``vmax`` and at least one decade under
    it, and rounded down to a power of ten so that the decade ticks of the log part do not
    crowd the zero tick.
    """
    if linthresh is None:
        if vmax <= 0:
            return 1e-3
        if magnitudes is None or not np.size(magnitudes):
            guess = 1e-3 * vmax
        else:
            guess = float(np.percentile(magnitudes, LINTHRESH_PERCENTILE))
        guess = min(max(guess, vmax * 10.0 ** -MAX_SYMLOG_DECADES), vmax / 10.0)
        return 10.0 ** np.floor(np.log10(guess))
    if not (np.isfinite(linthresh) and linthresh > 0):
        raise DualgpuError(
            f"linthresh must be a positive number (the half-width of the linear range around "
            f"zero in a symlog scale); got {linthresh!r}. Omit it for one taken from the data "
            f"(the {LINTHRESH_PERCENTILE:g}th percentile of |nonzero values|)."
        )
    return float(linthresh)


def _colormap(cmap, nan_color):
    return colormaps.get_cmap(cmap).with_extremes(bad=nan_color)


def _drawn_in(nan_color):
    return f"shown in {'green' if nan_color == NAN_COLOR else nan_color}"


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


def _draw_image(fig, ax, image, scale, cmap, nan_color, colorbar_label, **imshow):
    """Draw ``image`` on ``scale`` (a :class:`_Scale`) with a labelled colorbar; return it."""
    shown = ax.imshow(
        np.ma.masked_invalid(image), norm=scale.norm(),
        cmap=_colormap(scale.cmap(cmap), nan_color), interpolation="nearest", **imshow,
    )
    bar = fig.colorbar(shown, ax=ax, shrink=0.9, extend=scale.extend())
    bar.set_label(colorbar_label)
    return shown


# ---------------------------------------------------------------- fields

def _draw_field(fig, ax, field, *, extent, xlabel, ylabel, cmap, value_label, scale, linthresh,
                nan_color, title, robust=False, notes=()):
    """Draw a 1-D field as a line or a 2-D field as an image (white is zero)."""
    how = _drawn_in(nan_color) if field.ndim == 2 else "left out (gaps in the line)"
    notes = list(notes) + [_nonfinite_note(field, "The field", how)]
    shown = _Scale(field, scale, linthresh, robust,
                   what="colour scale" if field.ndim == 2 else "y scale")
    if shown.vmax == 0:
        notes.append("all values are zero")
    notes += shown.notes
    if field.ndim == 1:
        if extent is None:
            x = np.arange(field.size)
        elif len(extent) == 2:
            x = np.linspace(extent[0], extent[1], field.size)
        else:
            raise DualgpuError(
                f"extent of a 1-D field must be (xmin, xmax); got {tuple(extent)!r}. "
                "Pass two numbers, or None to use the sample index."
            )
        ax.axhline(0.0, color="0.4", linewidth=0.8, zorder=1)
        ax.plot(x, field, color=NEGATIVE_COLOR, linewidth=1.6, zorder=2)
        if scale == "symlog":
            ax.set_yscale("symlog", linthresh=shown.linthresh)
        if shown.clipped:
            low, high = shown.norm().vmin, shown.norm().vmax
            pad = 0.05 * (high - low)
            ax.set_ylim(low - pad if low < 0 else low, high + pad if high > 0 else high)
        ax.set_xlabel(xlabel if extent is not None else f"{xlabel} (sample index)")
        ax.set_ylabel(value_label if ylabel is None else ylabel)
        ax.grid(alpha=0.3)
        _set_title(ax, title, notes)
        return
    ny, nx = field.shape
    if extent is None:
        imshow_extent = (-0.5, nx - 0.5, -0.5, ny - 0.5)
        ylabel = "y" if ylabel is None else ylabel
        xlabel, ylabel = f"{xlabel} (column index)", f"{ylabel} (row index)"
    elif len(extent) == 4:
        imshow_extent = tuple(extent)
        ylabel = "y" if ylabel is None else ylabel
    else:
        raise DualgpuError(
            f"extent of a 2-D field must be (xmin, xmax, ymin, ymax); got {tuple(extent)!r}. "
            "Pass four numbers, or None to use the cell indices."
        )
    width = abs(imshow_extent[1] - imshow_extent[0])
    height = abs(imshow_extent[3] - imshow_extent[2])
    aspect = "equal" if 0.2 <= height / width <= 5 else "auto"
    _draw_image(
        fig, ax, field, shown, cmap, nan_color, value_label,
        origin="lower", extent=imshow_extent, aspect=aspect,
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _set_title(ax, title, notes)


def sensitivity_field(field, *, ax=None, title=None, extent=None, xlabel="x", ylabel=None,
                      cmap=None, colorbar_label="sensitivity", scale="linear",
                      linthresh=None, robust=False, nan_color=NAN_COLOR):
    """Return ``(fig, ax)`` showing a 1-D field as a line or a 2-D field as an image.

    A 2-D field ``field[iy, ix]`` is drawn with y upwards, white at zero: on a diverging
    colour scale symmetric around zero when it has both signs, on a sequential one (white
    to red) when it is all non-negative (white to blue when all non-positive). A 1-D field
    is drawn as a line over a zero line.

    Parameters
    ----------
    field : array_like, 1-D or 2-D (singleton axes are dropped)
        The sensitivity of something to one parameter, at each point of a grid, e.g. one lane
        of ``DualArray.partials``.
    ax : matplotlib Axes, optional
        Axes to draw into; a new headless figure is made when None.
    title : str, optional
        Defaults to the value label and the field's shape.
    extent : tuple, optional
        Physical coordinates: ``(xmin, xmax)`` for 1-D, ``(xmin, xmax, ymin, ymax)`` for 2-D.
        Without it the axes show sample indices.
    xlabel, ylabel : str
        Axis names (for 1-D, ``ylabel`` defaults to ``colorbar_label``).
    cmap : str or Colormap, optional
        Defaults to ``"RdBu_r"`` (both signs), ``"Reds"`` (all >= 0) or ``"Blues_r"``
        (all <= 0). A colormap you pass is used with the same limits (from zero for
        one-signed data).
    colorbar_label : str
        What the values are, with units if any (labels the colorbar, or the y axis in 1-D).
    scale : {"linear", "symlog"}
        "symlog" is linear within ``linthresh`` of zero and logarithmic outside.
    linthresh : float, optional
        Defaults to the data's own: the ``LINTHRESH_PERCENTILE``-th percentile of the
        nonzero magnitudes, rounded down to a power of ten.
    robust : bool or float
        Clip the colour scale (the y axis of a 1-D field) at the ``ROBUST_PERCENTILE``-th
        percentile of the nonzero magnitudes (or at the percentile given), so that a few
        large entries do not wash out the rest; the title says how many lie beyond.
    nan_color : color
        Colour of NaN and infinite entries.

    Returns
    -------
    fig : matplotlib.figure.Figure
        A headless figure (pyplot's state is untouched); save it with :func:`save`.
    ax : matplotlib.axes.Axes
        The axes drawn on (``ax`` itself when given).

    Raises
    ------
    DualgpuError
        When ``field`` is not 1-D or 2-D with at least 2 values (the message says how to
        slice it).

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu import plot
    >>> fig, ax = plot.sensitivity_field(np.sin(np.linspace(0.0, 3.0, 20)), title="du/dalpha")
    >>> ax.get_title()
    'du/dalpha'
    """
    field = _as_float_array(field, "field")
    field = field.reshape([size for size in field.shape if size != 1])
    if field.ndim not in (1, 2) or field.size < 2:
        raise DualgpuError(
            f"field must be 1-D or 2-D with at least 2 values; got shape {np.shape(field)}. "
            "Slice one line or plane out of it first, e.g. field[k] or field[:, :, k]."
        )
    if title is None:
        shape = " × ".join(str(size) for size in field.shape)
        title = f"{colorbar_label[:1].upper()}{colorbar_label[1:]} ({shape} field)"
    fig, ax = _figure_and_axes(ax, (7.0, 5.0) if field.ndim == 2 else (7.5, 4.0))
    _draw_field(
        fig, ax, field, extent=extent, xlabel=xlabel, ylabel=ylabel, cmap=cmap,
        value_label=colorbar_label, scale=scale, linthresh=linthresh, nan_color=nan_color,
        title=title, robust=robust,
    )
    return fig, ax


# ---------------------------------------------------------------- Jacobian

def _flat_index(index, count, shape, name, meaning):
    """Return ``index`` (an int, or a tuple into ``shape``) as a flat index below ``count``."""
    if isinstance(index, tuple):
        if shape is None or len(index) != len(shape):
            raise DualgpuError(
                f"{name}={index!r} is a tuple, which needs a matching shape for the {meaning}s; "
                f"got shape {shape!r}. Pass a flat integer index, or the shape too."
            )
        try:
            return int(np.ravel_multi_index(index, shape))
        except ValueError:
            raise DualgpuError(
                f"{name}={index!r} lies outside the {meaning} shape {shape}."
            ) from None
    if not isinstance(index, (int, np.integer)) or not -count <= index < count:
        raise DualgpuError(
            f"{name} must be an integer from 0 to {count - 1} (one of the {count} {meaning}s); "
            f"got {index!r}."
        )
    return int(index) % count


def _check_shape(shape, count, name, meaning):
    if shape is None:
        return None
    shape = tuple(int(size) for size in np.atleast_1d(shape))
    if len(shape) not in (1, 2) or int(np.prod(shape)) != count:
        raise DualgpuError(
            f"{name} must be a 1-D or 2-D shape holding one cell per {meaning} of J: expected "
            f"{count} cells, got {name}={shape} ({int(np.prod(shape))} cells). Pass the shape "
            f"of the {meaning} field, e.g. {name}=(ny, nx) with ny * nx == {count}."
        )
    return shape


def _as_jacobian(J, output_shape, input_shape):
    """Return ``(J, sparse)``: a 2-D ndarray or a scipy COO matrix, and whether it is sparse."""
    if _is_sparse(J):
        coo = J.tocoo()
        return coo, True
    J = _as_float_array(J, "J")
    if J.ndim == 1:  # a lone column or row is clear once a field shape names its length
        if output_shape is not None and int(np.prod(output_shape)) == J.size:
            return J[:, None], False
        if input_shape is not None and int(np.prod(input_shape)) == J.size:
            return J[None, :], False
    if J.ndim != 2:
        raise DualgpuError(
            f"J must be 2-D, one row per output and one column per input; got shape {J.shape}. "
            "For one input pass J[:, None]; for one output pass J[None, :]; for field-shaped "
            "outputs flatten them: J.reshape(n_outputs, n_inputs)."
        )
    return J, False


def _pool_max_abs(rows, cols, vals, shape, bins):
    """Return a ``bins`` grid holding, per block of J, its entry of largest magnitude.

    Signs are kept, NaN wins over any number, empty blocks are zero.
    """
    block_rows = rows.astype(np.int64) * bins[0] // shape[0]
    block_cols = cols.astype(np.int64) * bins[1] // shape[1]
    key = block_rows * bins[1] + block_cols
    magnitude = np.abs(vals)
    magnitude[np.isnan(magnitude)] = np.inf
    order = np.lexsort((magnitude, key))
    key = key[order]
    last = np.ones(key.size, dtype=bool)
    last[:-1] = key[1:] != key[:-1]
    grid = np.zeros(bins[0] * bins[1])
    grid[key[last]] = vals[order][last]
    return grid.reshape(bins)


def _matrix_image(J, sparse):
    """Return ``(image, note)``: J itself, or its max-magnitude pooling when it is large."""
    m, n = J.shape
    if m <= MAX_PIXELS and n <= MAX_PIXELS:
        return (J.toarray().astype(float) if sparse else J), ""
    bins = (min(m, MAX_PIXELS), min(n, MAX_PIXELS))
    if sparse:
        rows, cols, vals = J.row, J.col, J.data.astype(float)
    else:
        rows, cols = np.nonzero(J != 0)  # NaN != 0, so NaN entries are kept
        vals = J[rows, cols]
    block = f"{m / bins[0]:.2g} × {n / bins[1]:.2g}"
    note = f"pooled: each pixel shows the largest |entry| of its ~{block} block"
    return _pool_max_abs(rows, cols, vals, (m, n), bins), note


def _annotate_cells(ax, image, shown):
    """Write each value in its cell, white on dark colours and black on light ones."""
    norm, cmap = shown.norm, shown.cmap
    for (row, col), value in np.ndenumerate(image):
        if not np.isfinite(value):
            ax.text(col, row, "NaN" if np.isnan(value) else f"{value}", ha="center",
                    va="center", fontsize=8, color="white")
            continue
        red, green, blue, _ = cmap(float(norm(value)))
        dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
        ax.text(col, row, f"{value:.2g}", ha="center", va="center", fontsize=8,
                color="white" if dark else "black")


def _field_axis(output_shape, input_shape, input_index, output_index, m, n):
    """Return 1 to draw a column of J as an output field, 0 for a row, None for the matrix."""
    if input_index is not None and output_index is not None:
        raise DualgpuError(
            "Pass input_index (draw one column as an output field) or output_index (draw one "
            "row as an input field), not both."
        )
    if input_index is not None or output_index is not None:
        index, shape = ("input_index", "output_shape") if input_index is not None else (
            "output_index", "input_shape")
        if (output_shape if input_index is not None else input_shape) is None:
            raise DualgpuError(
                f"{index} picks what to draw as a field, so it needs {shape}=(ny, nx) (or "
                f"(n,)) for that field; got {shape}=None. Pass {shape}, or drop {index}."
            )
        return 1 if input_index is not None else 0
    if output_shape is not None and n == 1:
        return 1
    if input_shape is not None and m == 1:
        return 0
    if output_shape is not None or input_shape is not None:
        which, count, kind = (("input_index", n, "columns") if output_shape is not None
                              else ("output_index", m, "rows"))
        raise DualgpuError(
            f"A field shape was given but J has {count} {kind}; a field image shows one of "
            f"them. Pass {which}=k with 0 <= k < {count}, or drop the shape to see the matrix."
        )
    return None


def _column_or_row(J, sparse, index, axis):
    """Return column (axis=1) or row (axis=0) ``index`` of J as a dense 1-D array."""
    if sparse:
        J = J.tocsc() if axis == 1 else J.tocsr()
        piece = J[:, [index]] if axis == 1 else J[[index], :]
        return np.asarray(piece.toarray(), dtype=float).ravel()
    return np.array(J[:, index] if axis == 1 else J[index, :], dtype=float)


def jacobian_heatmap(J, *, ax=None, title=None, output_labels=None, input_labels=None,
                     output_name="output", input_name="input", scale="linear", linthresh=None,
                     output_shape=None, input_shape=None, input_index=None, output_index=None,
                     extent=None, cmap=None, colorbar_label=None, annotate=None,
                     robust=False, nan_color=NAN_COLOR):
    """Return ``(fig, ax)`` showing a Jacobian as a heatmap, white at zero.

    ``J[i, j] = ∂ output_i / ∂ input_j``: outputs run down the rows, inputs across the
    columns. With entries of both signs the colour limits are ``±max|J|``, red positive and
    blue negative; an all non-negative J runs from white (zero) to red, an all non-positive
    one from blue to white. ``robust=True`` clips the scale at the 99th percentile of
    ``|J|`` when a few entries dominate (the title suggests it when they do). Matrices with a
    side above ``MAX_PIXELS`` are pooled: each pixel shows the largest-magnitude entry of its
    block, so isolated nonzeros stay visible.

    With ``output_shape=(ny, nx)`` one column of J, the sensitivity of the whole output field
    to one input, is drawn as a 2-D image instead (``input_index`` picks the column; it may be
    left out when J has one column). Likewise ``input_shape`` with ``output_index`` draws one
    row: the sensitivity of one output to every cell of an input field.

    Parameters
    ----------
    J : array_like or scipy.sparse matrix, shape (n_outputs, n_inputs)
        A 1-D J is accepted when ``output_shape`` (a column) or ``input_shape`` (a row) gives
        its length. Sparse matrices are never densified whole when large.
    ax : matplotlib Axes, optional
        Axes to draw into; a new headless figure is made when None.
    title : str, optional
        Defaults to one naming the derivative and the matrix size.
    output_labels, input_labels : sequence of str, optional
        Names of the rows and of the columns (e.g. parameter names), one per row / column.
        Long lists are thinned to ``MAX_TICK_LABELS`` ticks and long names shortened.
    output_name, input_name : str
        What the rows and the columns are, for the axis labels, title and colorbar.
    scale : {"linear", "symlog"}
        "symlog" is linear within ``linthresh`` of zero and logarithmic outside: use it when
        entries span many orders of magnitude.
    linthresh : float, optional
        Defaults to the data's own: the ``LINTHRESH_PERCENTILE``-th percentile of the nonzero
        magnitudes, rounded down to a power of ten.
    output_shape, input_shape : tuple, optional
        Shapes of the output and input fields; see above.
    input_index, output_index : int or tuple, optional
        Which column (or row) to draw as a field; a tuple indexes into ``input_shape``
        (``output_shape``).
    extent : tuple, optional
        Physical ``(xmin, xmax, ymin, ymax)`` of a field drawn as an image.
    cmap : str or Colormap, optional
        Defaults to ``"RdBu_r"`` (both signs), ``"Reds"`` (all >= 0) or ``"Blues_r"``
        (all <= 0).
    colorbar_label : str, optional
        Defaults to ``"∂ {output_name} / ∂ {input_name}"``.
    annotate : bool, optional
        Write each value in its cell; by default only for matrices of at most
        ``MAX_ANNOTATED_CELLS`` entries.
    robust : bool or float
        Clip the colour scale at the ``ROBUST_PERCENTILE``-th percentile of the nonzero
        magnitudes (or at the percentile given); the colorbar's clipped ends are pointed and
        the title says how many entries lie beyond.
    nan_color : color
        Colour of NaN and infinite entries (which also raise a RuntimeWarning).

    Returns
    -------
    fig : matplotlib.figure.Figure
        A headless figure (pyplot's state is untouched); save it with :func:`save`.
    ax : matplotlib.axes.Axes
        The axes drawn on (``ax`` itself when given).

    Raises
    ------
    DualgpuError
        When ``annotate=True`` is asked of a matrix too large to label cell by cell.

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu import plot
    >>> fig, ax = plot.jacobian_heatmap(np.eye(4), output_name="u(T)", input_name="u(0)")
    >>> len(fig.axes)                      # the heatmap and its colour bar
    2
    """
    J, sparse = _as_jacobian(J, output_shape, input_shape)
    m, n = J.shape
    output_shape = _check_shape(output_shape, m, "output_shape", "output (row)")
    input_shape = _check_shape(input_shape, n, "input_shape", "input (column)")
    output_labels = _check_labels(output_labels, m, "output_labels", "output (row of J)")
    input_labels = _check_labels(input_labels, n, "input_labels", "input (column of J)")

    axis = _field_axis(output_shape, input_shape, input_index, output_index, m, n)
    if axis == 1:  # one column: d(output field) / d(one input)
        k = _flat_index(0 if input_index is None else input_index, n, input_shape,
                        "input_index", "input")
        values = _column_or_row(J, sparse, k, axis=1).reshape(output_shape)
        other = (input_labels[k] if input_labels
                 else input_name if n == 1 else f"{input_name}[{k}]")
        derivative, field_name = f"∂ {output_name} / ∂ {other}", output_name
    elif axis == 0:  # one row: d(one output) / d(input field)
        k = _flat_index(0 if output_index is None else output_index, m, output_shape,
                        "output_index", "output")
        values = _column_or_row(J, sparse, k, axis=0).reshape(input_shape)
        other = (output_labels[k] if output_labels
                 else output_name if m == 1 else f"{output_name}[{k}]")
        derivative, field_name = f"∂ {other} / ∂ {input_name}", input_name
    if axis is not None:
        fig, ax = _figure_and_axes(ax, (7.0, 5.0) if values.ndim == 2 else (7.5, 4.0))
        _draw_field(
            fig, ax, values, extent=extent, xlabel=f"{field_name} x",
            ylabel=f"{field_name} y" if values.ndim == 2 else None, cmap=cmap,
            value_label=colorbar_label or derivative, scale=scale, linthresh=linthresh,
            nan_color=nan_color, robust=robust,
            title=title or f"Sensitivity {derivative} over the {field_name} field",
        )
        return fig, ax

    image, pooled_note = _matrix_image(J, sparse)
    shown = _Scale(image, scale, linthresh, robust)
    notes = [_nonfinite_note(image, "J", _drawn_in(nan_color)), pooled_note]
    if shown.vmax == 0:
        notes.append("all entries are zero")
    notes += shown.notes
    fig, ax = _figure_and_axes(ax, (7.5, 6.0))
    drawn = _draw_image(
        fig, ax, image, shown, cmap, nan_color,
        colorbar_label or f"∂ {output_name} / ∂ {input_name}",
        aspect="auto", extent=(-0.5, n - 0.5, m - 0.5, -0.5),
    )
    if annotate and image.size > 4 * MAX_ANNOTATED_CELLS:
        raise DualgpuError(
            f"annotate=True writes one number per cell, which is unreadable for {m} × {n} "
            f"entries; it works up to {4 * MAX_ANNOTATED_CELLS}. Pass a slice of J, e.g. "
            "J[:20, :20]."
        )
    if annotate or (annotate is None and m * n <= MAX_ANNOTATED_CELLS):
        _annotate_cells(ax, image, drawn)
    for axis, labels, name, count, kind in (
        (ax.xaxis, input_labels, input_name, n, "columns"),
        (ax.yaxis, output_labels, output_name, m, "rows"),
    ):
        if labels is not None:
            _label_ticks(axis, labels, rotate=kind == "columns")
        else:
            axis.set_major_locator(MaxNLocator(nbins=10, integer=True))
        axis.set_label_text(name if labels is not None else f"{name} index ({count} {kind})")
    if title is None:
        title = f"Jacobian ∂ {output_name} / ∂ {input_name}  ({m} × {n})"
    _set_title(ax, title, notes)
    return fig, ax


# ---------------------------------------------------------------- parameters

def elasticities(sensitivities, parameter_values, output_value, *, near_zero=NEAR_ZERO,
                 output_scale=None, output_name="y"):
    """Return ``(elasticities or None, reason)``: ``p / y * ∂y/∂p``, unless ``|y|`` is near zero.

    An elasticity is the relative change of the output per relative change of a parameter.
    When the output ``y`` is close to zero it blows up and says nothing, so it is withheld
    (``None``, with a sentence saying why) when ``|y| < near_zero * output_scale``. The
    output's scale defaults to ``max_p |p ∂y/∂p|``, the change of ``y`` per relative change
    of its most influential parameter: elasticities are withheld when one would exceed
    ``1 / near_zero`` (100 by default). Pass ``output_scale`` (e.g. the largest ``|y|`` over
    a field) to judge against a scale of your own; ``output_name`` names ``y`` in the reason.

    Parameters
    ----------
    sensitivities : array_like
        ``∂y/∂p`` per parameter.
    parameter_values : array_like
        The parameters ``p``, one per sensitivity.
    output_value : float
        The output ``y``.
    near_zero : float, optional
        The relative size below which ``|y|`` counts as zero.
    output_scale : float, optional
        The scale ``|y|`` is judged against (default: ``max_p |p ∂y/∂p|``).
    output_name : str, optional
        Names ``y`` in the reason.

    Returns
    -------
    elasticities : ndarray or None
        ``p / y * ∂y/∂p``, or None when ``y`` is near zero.
    reason : str
        Empty, or why the elasticities were withheld.

    Examples
    --------
    >>> values, reason = elasticities([2.0, -1.0], [1.0, 3.0], output_value=-4.0)
    >>> values.tolist(), reason
    ([-0.5, 0.75], '')
    >>> elasticities([2.0, -1.0], [1.0, 3.0], output_value=1e-4)[0] is None
    True
    """
    sensitivities = np.asarray(sensitivities, dtype=float)
    scaled = sensitivities * np.asarray(parameter_values, dtype=float)
    finite = scaled[np.isfinite(scaled)]
    if output_scale is None:
        reference, what = _abs_max(finite), f"max |p ∂{output_name}/∂p|"
    else:
        reference, what = abs(float(output_scale)), "the output's scale"
    y = float(output_value)
    if y == 0 or abs(y) < near_zero * reference:
        return None, (f"|{output_name}| = {abs(y):.3g} is below {near_zero:g} × {what} = "
                      f"{near_zero * reference:.3g}")
    return scaled / y, ""


def _relative(sensitivities, relative, output_value, output_name, near_zero, output_scale):
    """Return ``(values, xlabel, quantity, note)`` for parameter_ranking's ``relative``."""
    if relative is None or relative is False:
        if output_value is not None:
            raise DualgpuError(
                "output_value only applies with relative=parameter_values; pass both to get "
                "elasticities (p / output ∂ output / ∂ p)."
            )
        return sensitivities, f"sensitivity ∂ {output_name} / ∂ parameter", "sensitivity", ""
    if relative is True:
        scale = _abs_max(sensitivities[np.isfinite(sensitivities)])
        return (sensitivities / scale if scale > 0 else sensitivities,
                "sensitivity / max |sensitivity|", "sensitivity", "")
    parameters = _as_float_array(relative, "relative (parameter values)").ravel()
    if parameters.size != sensitivities.size:
        raise DualgpuError(
            f"relative must be True or hold one value per parameter: expected "
            f"{sensitivities.size}, got {parameters.size}."
        )
    scaled = sensitivities * parameters
    scaled_label = (f"p × ∂ {output_name} / ∂ p  (change of {output_name} per relative "
                    "change of p)")
    if output_value is None:
        return scaled, scaled_label, "sensitivity × parameter value", ""
    values, reason = elasticities(sensitivities, parameters, output_value, near_zero=near_zero,
                                  output_scale=output_scale, output_name=output_name)
    if values is None:
        note = f"elasticities not shown: {reason}; bars show p × ∂{output_name}/∂p"
        return scaled, scaled_label, "sensitivity × parameter value", note
    note = ""
    if float(output_value) < 0:
        note = f"{output_name} < 0: elasticities have the opposite sign to p ∂{output_name}/∂p"
    return (values, f"elasticity (p / {output_name}) ∂ {output_name} / ∂ p  [% per %]",
            "elasticity", note)


def parameter_ranking(names, sensitivities, *, ax=None, relative=None, output_value=None,
                      output_name="output", title=None, xlabel=None, top=None, annotate=True,
                      near_zero=NEAR_ZERO, output_scale=None):
    """Return ``(fig, ax)`` with a horizontal bar per parameter, largest magnitude on top.

    Each bar is coloured by the sign of ``∂ output / ∂ p`` itself, whatever the bars show:
    red when raising the parameter raises the output, blue when it lowers it (grey: no
    effect); the legend says so. Elasticities divide by the output, so their sign flips
    when the output is negative; the colour does not. Each bar is annotated with its value.

    Parameters
    ----------
    names : sequence of str
        Parameter names, one per sensitivity.
    sensitivities : array_like, shape (P,)
        ``∂ output / ∂ parameter_p``, e.g. one row of a Jacobian.
    ax : matplotlib Axes, optional
        Axes to draw into; a new headless figure is made when None.
    relative : None, True or array_like of shape (P,)
        None plots the sensitivities as they are. True divides them by the largest magnitude.
        Parameter values ``p`` plot ``p * ∂ output / ∂ p`` (the change in output per relative
        change in each parameter), which compares parameters of different units; with
        ``output_value`` too, ``p / output * ∂ output / ∂ p`` (dimensionless elasticities),
        unless the output is near zero (see :func:`elasticities`): then the bars show
        ``p * ∂ output / ∂ p`` and the title says why.
    output_value : float, optional
        The output's value, for elasticities.
    output_name : str
        What was differentiated, for the default labels.
    title, xlabel : str, optional
        Default to a title saying how bars are sorted and a label saying what they show.
    top : int, optional
        Show only the ``top`` largest; defaults to all, or ``MAX_RANKED`` when there are more.
    annotate : bool
        Write each value at the end of its bar.
    near_zero, output_scale : float, optional
        When elasticities are withheld for a near-zero output; see :func:`elasticities`.

    Returns
    -------
    fig : matplotlib.figure.Figure
        A headless figure (pyplot's state is untouched); save it with :func:`save`.
    ax : matplotlib.axes.Axes
        The axes drawn on (``ax`` itself when given).

    Raises
    ------
    DualgpuError
        When ``sensitivities`` is not 1-D (one value per parameter) or ``top`` is not a
        positive number.

    Examples
    --------
    >>> from dualgpu import plot
    >>> fig, ax = plot.parameter_ranking(["alpha", "left", "right"], [0.5, -0.1, 0.02])
    >>> len(ax.patches)                    # one bar per parameter
    3
    """
    raw = _as_float_array(sensitivities, "sensitivities")
    if raw.ndim != 1 or raw.size == 0:
        raise DualgpuError(
            f"sensitivities must be 1-D, one value per parameter; got shape {raw.shape}. "
            "For a Jacobian row pass J[i]; for a gradient of shape (1, P) pass g.ravel()."
        )
    names = _check_labels(names, raw.size, "names", "sensitivity")
    values, default_xlabel, quantity, relative_note = _relative(
        raw, relative, output_value, output_name, near_zero, output_scale)
    nan_note = _nonfinite_note(values, "sensitivities", "listed last, without a bar")
    magnitude = np.where(np.isfinite(values), np.abs(values), -1.0)  # NaN ranks last
    order = np.argsort(-magnitude, kind="stable")
    count = values.size
    top = min(count, MAX_RANKED) if top is None else int(top)
    if top < 1:
        raise DualgpuError(f"top must be a positive number of bars; got {top}.")
    order = order[:top]
    shown, shown_names, signs = values[order], [_short(names[i]) for i in order], raw[order]

    fig, ax = _figure_and_axes(ax, (7.5, max(3.0, 0.38 * len(order) + 1.6)))
    positions = np.arange(len(order))[::-1]  # largest at the top
    finite = np.isfinite(shown)
    bar_colors = np.where(signs > 0, POSITIVE_COLOR,
                          np.where(signs < 0, NEGATIVE_COLOR, ZERO_COLOR))
    ax.barh(positions[finite], shown[finite], color=bar_colors[finite], height=0.7)
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    ax.set_yticks(positions, shown_names)
    ax.set_ylim(-0.6, len(order) - 0.4)
    low = min(0.0, float(np.min(shown[finite]))) if finite.any() else 0.0
    high = max(0.0, float(np.max(shown[finite]))) if finite.any() else 0.0
    pad = 0.22 * (high - low) if high > low else 1.0  # room for the value labels
    ax.set_xlim(low - pad if low < 0 else 0.0, high + pad if high > 0 or low == 0 else 0.0)
    if annotate:
        for y, value in zip(positions, shown):
            if not np.isfinite(value):
                ax.text(0.5, y, f"{value} (no bar)", va="center", ha="center", fontsize=9,
                        color="0.3", transform=ax.get_yaxis_transform())
                continue
            ax.text(value, y, f" {value:.3g} ", va="center",
                    ha="left" if value >= 0 else "right", fontsize=9)
    ax.set_xlabel(xlabel or default_xlabel)
    ax.set_ylabel("parameter")
    ax.grid(axis="x", alpha=0.3)
    y = output_name
    legend = [(signs[finite] > 0, POSITIVE_COLOR, f"∂{y}/∂p > 0: {y} rises with p"),
              (signs[finite] < 0, NEGATIVE_COLOR, f"∂{y}/∂p < 0: {y} falls as p rises"),
              (signs[finite] == 0, ZERO_COLOR, f"∂{y}/∂p = 0")]
    bars = shown[finite]
    corner = ("lower right" if np.all(bars >= 0) else "lower left" if np.all(bars <= 0)
              else "best")  # the smallest bar, at the bottom, leaves that corner free
    ax.legend(handles=[Patch(color=color, label=label) for present, color, label in legend
                       if present.any()],
              title=f"colour: sign of ∂{y}/∂p", title_fontsize=8, loc=corner, fontsize=8,
              frameon=False)
    notes = [nan_note, relative_note]
    if len(order) < count:
        notes.append(f"largest {len(order)} of {count} parameters")
    _set_title(ax, title or f"Parameters ranked by |{quantity}|, largest on top", notes)
    return fig, ax


def sensitivity_over_time(times, sensitivities, *, labels=None, ax=None, title=None,
                          xlabel="time", ylabel="sensitivity ∂ output / ∂ parameter",
                          logy=False, linthresh=None):
    """Return ``(fig, ax)`` with one line per parameter showing its sensitivity over time.

    Parameters
    ----------
    times : array_like, shape (T,)
        Sample times.
    sensitivities : array_like, shape (T,) or (T, P)
        Sensitivity at each time, one column per parameter (a (P, T) array is rejected with a
        hint to transpose it).
    labels : sequence of str, optional
        One name per parameter, for the legend.
    ax : matplotlib Axes, optional
        Axes to draw into; a new headless figure is made when None.
    title, xlabel, ylabel : str
        Axis text; say the units in them.
    logy : bool
        Logarithmic y axis: "log" when every value is positive, otherwise "symlog" (linear
        within ``linthresh`` of zero, logarithmic outside) so that signs are kept.
    linthresh : float, optional
        Defaults to the data's own: the ``LINTHRESH_PERCENTILE``-th percentile of the nonzero
        magnitudes, rounded down to a power of ten.

    Returns
    -------
    fig : matplotlib.figure.Figure
        A headless figure (pyplot's state is untouched); save it with :func:`save`.
    ax : matplotlib.axes.Axes
        The axes drawn on (``ax`` itself when given).

    Raises
    ------
    DualgpuError
        When ``times`` is not 1-D or ``sensitivities`` is not ``(T,)`` or ``(T, P)`` with
        ``T = len(times)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu import plot
    >>> t = np.linspace(0.0, 1.0, 11)
    >>> fig, ax = plot.sensitivity_over_time(t, np.c_[t, t ** 2], labels=["k", "c"])
    >>> [text.get_text() for text in ax.get_legend().get_texts()][:2]
    ['k', 'c']
    """
    times = _as_float_array(times, "times")
    values = _as_float_array(sensitivities, "sensitivities")
    if times.ndim != 1:
        raise DualgpuError(f"times must be 1-D, one entry per sample; got shape {times.shape}.")
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != times.size:
        hint = ("pass sensitivities.T" if values.ndim == 2 and values.shape[1] == times.size
                else "pass one row per time")
        raise DualgpuError(
            f"sensitivities must have shape (T,) or (T, P) with T = len(times) = {times.size}; "
            f"got {values.shape}. Fix: {hint}."
        )
    count = values.shape[1]
    labels = _check_labels(labels, count, "labels", "parameter (column of sensitivities)")
    if labels is None:
        labels = [f"parameter {p}" for p in range(count)] if count > 1 else None
    nan_note = _nonfinite_note(values, "sensitivities", "left out (gaps in the lines)")

    fig, ax = _figure_and_axes(ax, (8.5 if count > 10 else 7.5, 4.5))
    palette = colormaps["tab10" if count <= 10 else "tab20"]
    styles = ("-", "--", ":", "-.")
    for p in range(count):
        ax.plot(times, values[:, p], color=palette(p % palette.N), linewidth=1.6,
                linestyle=styles[(p // palette.N) % len(styles)],
                label=_short(labels[p]) if labels else None)
    ax.axhline(0.0, color="0.4", linewidth=0.8, zorder=0)
    finite = values[np.isfinite(values)]
    if logy:
        if finite.size and np.all(finite > 0):
            ax.set_yscale("log")
        else:
            magnitudes = np.abs(finite[finite != 0])
            ax.set_yscale("symlog", linthresh=_linthresh(linthresh, _abs_max(finite),
                                                         magnitudes))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if labels:
        if count <= 8:
            ax.legend(fontsize=9)
        else:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      ncols=1 if count <= 20 else 2, frameon=False)
    _set_title(ax, title or "Sensitivity over time", [nan_note])
    return fig, ax


# ---------------------------------------------------------------- output

def save(fig, path, dpi=150):
    """Return the path written: ``fig`` saved as a PNG (parent folders are created).

    Parameters
    ----------
    fig : Figure, Axes, or the ``(fig, ax)`` pair the plotting functions return
    path : str or Path
        Where to write; ``.png`` is appended when there is no suffix. Another suffix that
        matplotlib knows (``.pdf``, ``.svg``) selects that format.
    dpi : int
        Pixels per inch.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    DualgpuError
        When ``fig`` is not a matplotlib Figure or Axes (or the ``(fig, ax)`` pair).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from dualgpu import plot
    >>> path = plot.save(plot.jacobian_heatmap(np.eye(3)), Path(tempfile.mkdtemp()) / "J")
    >>> path.name
    'J.png'
    """
    if isinstance(fig, tuple):
        fig = fig[0]
    if not hasattr(fig, "savefig"):
        if hasattr(fig, "get_figure"):
            fig = fig.get_figure()
        else:
            raise DualgpuError(
                f"save needs a matplotlib Figure (or the (fig, ax) pair the plotting functions "
                f"return); got {type(fig).__name__}."
            )
    path = Path(path)
    if not path.suffix:
        path = path.with_suffix(".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    if getattr(fig, "canvas", None) is None or type(fig.canvas).__name__ == "FigureCanvasBase":
        FigureCanvasAgg(fig)
    fig.savefig(path, dpi=dpi)
    return path


def __getattr__(name):
    # global sensitivity figures live with their analysis (dualgpu.sensitivity.plots)
    if name in ("dgsm_bars", "dgsm_maps"):
        from dualgpu.sensitivity import plots

        return getattr(plots, name)
    raise AttributeError(f"module 'dualgpu.plot' has no attribute {name!r}")
