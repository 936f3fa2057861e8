"""Colour (and y) scales of :mod:`dualgpu.plot`: white at zero, diverging or sequential by sign.

:class:`_Scale` reads the data once: its sign, its largest magnitude, a robust clipping
percentile and a symlog linear range, with notes for the title; :func:`_draw_image` draws an
image on it with a labelled colorbar.
"""
import numpy as np
from matplotlib import colormaps, colors

from dualgpu.errors import DualgpuError
from dualgpu.plot._base import (
    DIVERGING_CMAP, DOMINANT_FRACTION, LINTHRESH_PERCENTILE, MAX_SYMLOG_DECADES, NAN_COLOR,
    ROBUST_PERCENTILE, SCALES, SEQUENTIAL_CMAPS, _check_choice, _entries,
)

__all__ = ["_Scale", "_robust_percentile", "_dominated", "_linthresh", "_colormap",
           "_drawn_in", "_draw_image"]


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



def _draw_image(fig, ax, image, scale, cmap, nan_color, colorbar_label, **imshow):
    """Draw ``image`` on ``scale`` (a :class:`_Scale`) with a labelled colorbar; return it."""
    shown = ax.imshow(
        np.ma.masked_invalid(image), norm=scale.norm(),
        cmap=_colormap(scale.cmap(cmap), nan_color), interpolation="nearest", **imshow,
    )
    bar = fig.colorbar(shown, ax=ax, shrink=0.9, extend=scale.extend())
    bar.set_label(colorbar_label)
    return shown
