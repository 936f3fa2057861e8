"""Sensitivities over time: one line per parameter."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence
import numpy.typing as npt
import numpy as np
from matplotlib import colormaps

from dualgpu.errors import DualgpuError
from dualgpu.plot._base import (
    _abs_max, _as_float_array, _check_labels, _figure_and_axes, _nonfinite_note, _set_title,
    _short,
)
from dualgpu.plot._scale import _linthresh

if TYPE_CHECKING:  # matplotlib loads on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["sensitivity_over_time"]


def sensitivity_over_time(times: npt.ArrayLike, sensitivities: npt.ArrayLike, *,
                          labels: Sequence[str] | None = None, ax: Axes | None = None,
                          title: str | None = None, xlabel: str = "time",
                          ylabel: str = "sensitivity ∂ output / ∂ parameter",
                          logy: bool = False,
                          linthresh: float | None = None) -> tuple[Figure, Axes]:
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
