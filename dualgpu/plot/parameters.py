"""Parameters ranked by their effect on one output, and elasticities ``p / y * dy/dp``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence
import numpy.typing as npt
import numpy as np
from matplotlib.patches import Patch

from dualgpu.errors import DualgpuError
from dualgpu.plot._base import (
    MAX_RANKED, NEAR_ZERO, NEGATIVE_COLOR, POSITIVE_COLOR, ZERO_COLOR, _abs_max,
    _as_float_array, _check_labels, _figure_and_axes, _nonfinite_note, _set_title, _short,
)

if TYPE_CHECKING:  # matplotlib loads on first use
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["parameter_ranking", "elasticities"]


def elasticities(sensitivities: npt.ArrayLike, parameter_values: npt.ArrayLike,
                 output_value: float, *, near_zero: float = NEAR_ZERO,
                 output_scale: float | None = None,
                 output_name: str = "y") -> tuple[np.ndarray | None, str]:
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


def parameter_ranking(names: Sequence[str], sensitivities: npt.ArrayLike, *,
                      ax: Axes | None = None, relative: Any = None,
                      output_value: float | None = None, output_name: str = "output",
                      title: str | None = None, xlabel: str | None = None,
                      top: int | None = None, annotate: bool = True,
                      near_zero: float = NEAR_ZERO,
                      output_scale: float | None = None) -> tuple[Figure, Axes]:
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
