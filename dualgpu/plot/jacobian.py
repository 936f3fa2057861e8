"""Jacobian heatmaps: the matrix (pooled when large), or one row or column as a field."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence
import numpy as np
from matplotlib.ticker import MaxNLocator

from dualgpu.errors import DualgpuError
from dualgpu.plot._base import (
    MAX_ANNOTATED_CELLS, MAX_PIXELS, NAN_COLOR, _as_float_array, _check_labels,
    _figure_and_axes, _is_sparse, _label_ticks, _nonfinite_note, _set_title,
)
from dualgpu.plot._scale import _Scale, _draw_image, _drawn_in
from dualgpu.plot.fields import _draw_field

if TYPE_CHECKING:  # matplotlib loads on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["jacobian_heatmap"]


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


def jacobian_heatmap(J: Any, *, ax: Axes | None = None, title: str | None = None,
                     output_labels: Sequence[str] | None = None,
                     input_labels: Sequence[str] | None = None, output_name: str = "output",
                     input_name: str = "input", scale: str = "linear",
                     linthresh: float | None = None,
                     output_shape: tuple[int, ...] | None = None,
                     input_shape: tuple[int, ...] | None = None, input_index: Any = None,
                     output_index: Any = None, extent: Sequence[float] | None = None,
                     cmap: Any = None, colorbar_label: str | None = None,
                     annotate: bool | None = None, robust: bool = False,
                     nan_color: Any = NAN_COLOR) -> tuple[Figure, Axes]:
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
