"""Figures of a DGSM analysis: ranked bars with intervals, and sensitivity maps of fields.

Both draw on a headless :class:`matplotlib.figure.Figure`, like the rest of
:mod:`dualgpu.plot`, return ``(fig, ax)`` or ``(fig, axes)``, and are saved with
:func:`dualgpu.plot.save`. They take a :class:`dualgpu.sensitivity.DGSMResult` and are also
reachable as ``dualgpu.sensitivity.dgsm_bars`` (and ``dgsm_maps``) and as the result's
``plot()`` and ``plot_maps()`` methods.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence
import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dualgpu.errors import DualgpuError
from dualgpu.plot._base import (
    NAN_COLOR, NEGATIVE_COLOR, POSITIVE_COLOR, ZERO_COLOR, _figure_and_axes,
)

if TYPE_CHECKING:  # matplotlib loads on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["dgsm_bars", "dgsm_maps"]

BOUND_COLOR = "#4d4d4d"
SOBOL_COLOR = "#e08214"
_MEASURE_LABELS = {
    "total_upper": "upper bound on the total Sobol index  C·ν / Var(f)  (dimensionless)",
    "nu": "DGSM  ν = E[(∂f/∂x)²]  (output² / parameter²)",
    "mu": "mean derivative  μ = E[∂f/∂x]  (sign: direction of the effect)",
    "mu_star": "mean absolute derivative  μ* = E[|∂f/∂x|]",
}


def _check_measure(measure):
    if measure not in _MEASURE_LABELS:
        raise DualgpuError(f"measure must be one of {sorted(_MEASURE_LABELS)}; got {measure!r}.")


def _sign_word(mu):
    if mu > 0:
        return "f rises"
    if mu < 0:
        return "f falls"
    return "no mean effect"


def dgsm_bars(result: Any, *, output: int | None = None, measure: str = "total_upper",
              ax: Axes | None = None, title: str | None = None,
              top: int | None = None) -> tuple[Figure, Axes]:
    """Ranked horizontal bars of one measure, with its confidence intervals.

    With ``measure="total_upper"`` (default) SALib's Sobol total index is drawn
    beside each bound when it was attached (``DGSMResult.attach_sobol``):
    the bound must reach past it. Each label says whether the output rises
    or falls with the parameter on average (the sign of ``mu``).

    Parameters
    ----------
    result : DGSMResult
    output : int or tuple, optional
        The output entry of a field output; default: the variance-weighted
        bound over all cells (``measure="total_upper"`` only).
    measure : {"total_upper", "nu", "mu", "mu_star"}
    ax : matplotlib Axes, optional
    title : str, optional
    top : int, optional
        Show only the ``top`` highest-ranked parameters.

    Returns
    -------
    (Figure, Axes)

    Raises
    ------
    DualgpuError
        For an unknown ``measure``, an ``output`` that is not one entry of the
        output shape, or a field output without ``output=`` for a measure other
        than ``"total_upper"``.

    Examples
    --------
    >>> from dualgpu.sensitivity import dgsm, dgsm_bars
    >>> problem = {"names": ["a", "b", "c"], "bounds": [[0, 1], [0, 1], [0, 1]]}
    >>> r = dgsm(lambda X: 3 * X[:, 0] - X[:, 1] + 0.1 * X[:, 2], problem, 64, seed=0,
    ...          batched=True)
    >>> fig, ax = dgsm_bars(r, measure="mu", top=2)
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['a  (f rises)', 'b  (f falls)']
    >>> len(ax.patches), ax.get_xlabel()
    (2, 'mean derivative  μ = E[∂f/∂x]  (sign: direction of the effect)')
    """
    _check_measure(measure)
    value, ci = result._pick(measure, output)
    aggregated = output is None and result.output_shape != ()
    mu = None if aggregated else result._pick("mu", output)[0]
    key = np.abs(value) if measure == "mu" else value
    order = np.argsort(-np.nan_to_num(key, nan=-np.inf), kind="stable")
    if top is not None:
        order = order[:int(top)]
    k = len(order)
    fig, ax = _figure_and_axes(ax, (7.0, 1.2 + 0.45 * k))
    ypos = np.arange(k)[::-1].astype(float)
    sobol = None
    if measure == "total_upper" and result.sobol_total is not None and not aggregated:
        sobol, sobol_ci = result._sobol(output)
    height = 0.38 if sobol is not None else 0.7
    shift = height / 2 if sobol is not None else 0.0
    vals = value[order]
    err = np.abs(np.stack([vals - ci[0, order], ci[1, order] - vals]))
    if measure == "mu":
        colours = [POSITIVE_COLOR if v > 0 else NEGATIVE_COLOR if v < 0 else ZERO_COLOR
                   for v in vals]
    else:
        colours = BOUND_COLOR if measure == "total_upper" else POSITIVE_COLOR
    level = f"{result.conf_level:.0%}"
    ax.barh(ypos + shift, vals, height=height, color=colours, xerr=err, capsize=3,
            label=("DGSM bound on S_tot" if measure == "total_upper" else measure)
            + f" ({level} CI)")
    if sobol is not None:
        s = sobol[order]
        serr = None if sobol_ci is None else np.abs(np.asarray(sobol_ci)[order])
        ax.barh(ypos - shift, s, height=height, color=SOBOL_COLOR, xerr=serr, capsize=3,
                label="Sobol total index S_tot (SALib)")
    labels = []
    for i in order:
        unit = result.units.get(result.names[i])
        name = result.names[i] + (f" [{unit}]" if unit else "")
        labels.append(name if mu is None else f"{name}  ({_sign_word(mu[i])})")
    ax.set_yticks(ypos, labels)
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    ax.set_xlabel(_MEASURE_LABELS[measure])
    if measure == "total_upper":
        ax.axvline(1.0, color="0.6", linewidth=0.8, linestyle=":")
    ax.legend(loc="lower right", fontsize="small")
    what = result.output_name or "the output"
    if aggregated:
        where = f"all {int(np.prod(result.output_shape))} cells (variance-weighted)"
    elif output is not None:
        where = f"entry {output}"
    else:
        where = None
    ax.set_title(title or (f"Global sensitivity of {what}" + (f", {where}" if where else "")
                           + f"\n{result.n_used} samples, ranked, bars: {level} bootstrap CI"),
                 fontsize="medium")
    return fig, ax


def dgsm_maps(result: Any, *, measure: str = "total_upper",
              names: Sequence[str] | None = None, extent: Sequence[float] | None = None,
              axis: int | None = None, xlabel: str = "x", ylabel: str = "y",
              title: str | None = None, shared_scale: bool | None = None) -> tuple[Figure, Any]:
    """Sensitivity maps of a field output: one panel per parameter (2-D fields), or one image
    of parameters x positions (1-D fields, e.g. a time series).

    Parameters
    ----------
    result : DGSMResult
        Of a field output (1-D or 2-D).
    measure : {"total_upper", "nu", "mu", "mu_star"}
        ``"mu"`` is drawn on a diverging scale (red: the output rises with the
        parameter, blue: it falls).
    names : list of str, optional
        Parameters to show (default: all, ranked).
    extent : (left, right, bottom, top), optional
        Coordinates of a 2-D field (as ``imshow``).
    axis : array_like, optional
        Coordinates of a 1-D field (e.g. the output times).
    xlabel, ylabel : str
        Axis labels (with units).
    title : str, optional
    shared_scale : bool, optional
        One colour scale for all parameters (comparable across them). By default only for
        ``"total_upper"``, which is dimensionless: the other measures carry the unit of
        each parameter (``∂f/∂x``), so each parameter gets its own panel and colour bar.

    Returns
    -------
    (Figure, ndarray of Axes)
        For a 1-D field one Axes (a shared scale: parameters x positions) or one per
        parameter shown; for a 2-D field one per parameter shown.

    Raises
    ------
    DualgpuError
        For an output that is not a 1-D or 2-D field (a scalar: use
        :func:`dgsm_bars`), an unknown ``measure``, or a name in ``names``
        that is not one of the parameters.

    Examples
    --------
    A 1-D field (e.g. a time series): one image, parameters x positions.

    >>> import numpy as np
    >>> from dualgpu.sensitivity import dgsm, dgsm_maps
    >>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    >>> t = np.linspace(0.0, 1.0, 5)
    >>> r = dgsm(lambda X: X[:, :1] * t + X[:, 1:] * t ** 2, problem, 32, seed=0, batched=True)
    >>> fig, axes = dgsm_maps(r, axis=t, xlabel="t [s]")
    >>> axes.shape, [label.get_text() for label in axes[0].get_yticklabels()]
    ((1,), ['a', 'b'])

    The mean derivative has the unit of each parameter: one panel and colour bar each.

    >>> fig, axes = dgsm_maps(r, measure="mu", axis=t, xlabel="t [s]")
    >>> [ax.get_title() for ax in axes]
    ['a', 'b']

    A 2-D field: one panel per parameter, ranked.

    >>> x, y = np.meshgrid(np.linspace(0, 1, 4), np.linspace(0, 1, 3), indexing="ij")
    >>> r2 = dgsm(lambda X: X[:, 0, None, None] * x + X[:, 1, None, None] * y, problem, 32,
    ...           seed=0, batched=True)
    >>> fig, axes = dgsm_maps(r2, extent=(0, 1, 0, 1))
    >>> [ax.get_title() for ax in axes]
    ['b', 'a']
    """
    _check_measure(measure)
    shape = result.output_shape
    if len(shape) not in (1, 2):
        raise DualgpuError(
            f"dgsm_maps: the output has shape {shape}; expected a 1-D or 2-D field. For a "
            "scalar output use dgsm_bars.")
    data = getattr(result, measure)
    unknown = [n for n in names or () if n not in result.names]
    if unknown:
        raise DualgpuError(
            f"dgsm_maps: names {unknown} are not parameters of this result; expected some of "
            f"{list(result.names)}.")
    order = [result.names.index(n) for n in (names or result.ranking())]
    diverging = measure == "mu"
    finite = data[order][np.isfinite(data[order])]
    vmax = float(np.max(np.abs(finite))) if finite.size else 1.0
    vmax = vmax or 1.0
    cmap = colormaps["RdBu_r" if diverging else "Reds"].with_extremes(bad=NAN_COLOR)
    vmin = -vmax if diverging else 0.0
    what = result.output_name or "the output"
    label = _MEASURE_LABELS[measure]
    missing = int((~np.isfinite(data[order])).sum())
    if missing:
        label += (f"\ngreen: {missing} undefined entries (the output does not vary there)"
                  if measure == "total_upper" else f"\ngreen: {missing} non-finite entries")
    if shared_scale is None:
        shared_scale = measure == "total_upper"
    fig = Figure(layout="constrained")
    FigureCanvasAgg(fig)
    if len(shape) == 1 and not shared_scale:
        return _maps_1d_per_parameter(fig, result, data, order, cmap, diverging, axis, xlabel,
                                      title or f"Sensitivity maps of {what}: {label}\n"
                                      f"{result.n_used} samples, one colour scale per "
                                      "parameter (units differ)")
    if len(shape) == 1:
        fig.set_size_inches(8.0, 1.4 + 0.4 * len(order))
        ax = fig.add_subplot()
        x = np.arange(shape[0]) if axis is None else np.asarray(axis, dtype=float)
        image = ax.pcolormesh(x, np.arange(len(order)), data[order], cmap=cmap, vmin=vmin,
                              vmax=vmax, shading="nearest")
        ax.set_yticks(np.arange(len(order)), [result.names[i] for i in order])
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        fig.colorbar(image, ax=ax, label=label.split("  (")[0].split("\n")[0])
        ax.set_title(title or f"Sensitivity map of {what}: {label}\n{result.n_used} samples",
                     fontsize="medium")
        return fig, np.array([ax])
    cols = min(3, len(order))
    rows = -(-len(order) // cols)
    fig.set_size_inches(3.6 * cols + 0.8, 3.3 * rows + 0.6)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, i in zip(axes, order):
        panel = data[i]
        if not shared_scale:
            f = panel[np.isfinite(panel)]
            vmax = float(np.max(np.abs(f))) if f.size and np.max(np.abs(f)) > 0 else 1.0
            vmin = -vmax if diverging else 0.0
        image = ax.imshow(panel.T, origin="lower", extent=extent, cmap=cmap, vmin=vmin,
                          vmax=vmax, aspect="auto")
        unit = result.units.get(result.names[i])
        ax.set_title(result.names[i] + (f" [{unit}]" if unit else ""), fontsize="medium")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if not shared_scale:
            fig.colorbar(image, ax=ax)
    for ax in axes[len(order):]:
        ax.set_visible(False)
    if shared_scale:
        fig.colorbar(image, ax=list(axes[:len(order)]), label=label.split("  (")[0].split("\n")[0])
    fig.suptitle(title or f"Sensitivity maps of {what}: {label}\n{result.n_used} samples",
                 fontsize="medium")
    return fig, axes[:len(order)]


def _maps_1d_per_parameter(fig, result, data, order, cmap, diverging, axis, xlabel, title):
    """A 1-D field's measure, one strip per parameter with its own colour bar and unit."""
    fig.set_size_inches(8.0, 1.0 + 1.1 * len(order))
    axes = np.atleast_1d(fig.subplots(len(order), 1, sharex=True, squeeze=False)).ravel()
    x = np.arange(data.shape[-1]) if axis is None else np.asarray(axis, dtype=float)
    half = np.diff(x) / 2 if x.size > 1 else np.array([0.5])
    edges = np.concatenate([[x[0] - half[0]], x[:-1] + half, [x[-1] + half[-1]]])
    for ax, i in zip(axes, order):
        panel = data[i]
        finite = panel[np.isfinite(panel)]
        vmax = float(np.max(np.abs(finite))) if finite.size else 0.0
        vmax = vmax or 1.0
        image = ax.pcolormesh(edges, [0.0, 1.0], panel[None, :], cmap=cmap, shading="flat",
                              vmin=-vmax if diverging else 0.0, vmax=vmax)
        ax.set_yticks([])
        name = result.names[i]
        unit = result.units.get(name)
        ax.set_title(name + (f" [{unit}]" if unit else ""), fontsize="medium")
        per = (f"({unit})" if "/" in unit else unit) if unit else None
        fig.colorbar(image, ax=ax, pad=0.01, label=f"output per {per}" if per else None,
                     aspect=8)
    axes[-1].set_xlabel(xlabel)
    fig.suptitle(title, fontsize="medium")
    return fig, axes
