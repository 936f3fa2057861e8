"""Sensitivity fields: a 1-D field as a line, a 2-D field as an image, white at zero."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence
import numpy.typing as npt
import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.plot._base import (
    NAN_COLOR, NEGATIVE_COLOR, _as_float_array, _figure_and_axes, _nonfinite_note, _set_title,
)
from dualgpu.plot._scale import _Scale, _draw_image, _drawn_in

if TYPE_CHECKING:  # matplotlib loads on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["sensitivity_field"]


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


def sensitivity_field(field: npt.ArrayLike, *, ax: Axes | None = None,
                      title: str | None = None, extent: Sequence[float] | None = None,
                      xlabel: str = "x", ylabel: str | None = None, cmap: Any = None,
                      colorbar_label: str = "sensitivity", scale: str = "linear",
                      linthresh: float | None = None, robust: bool = False,
                      nan_color: Any = NAN_COLOR) -> tuple[Figure, Axes]:
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
