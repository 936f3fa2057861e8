"""The result of a DGSM analysis: measures, their intervals, a table and plots."""
import numpy as np

from dualgpu.errors import DualgpuError

__all__ = ["DGSMResult"]

_MEASURES = ("nu", "mu", "mu_star", "total_upper")


def _fmt(x):
    if not np.isfinite(x):
        return "nan"
    return f"{x:.3g}"


class DGSMResult:
    """Derivative-based global sensitivity measures of one model output (scalar or field).

    Shapes: ``p`` parameters, the model's output shape ``out`` (``()`` for a
    scalar).

    :func:`dgsm` and :func:`analyze` build it; the constructor only stores what
    it is given (keyword arguments only, nothing checked).

    Parameters
    ----------
    names : sequence of str
        The parameters, in the problem's order.
    dists : sequence of str
        Their distributions (SALib's names).
    units : dict of str to str or None
        Units of the parameters, by name, for tables and plots (None: none).
    output_name : str or None
        Name (and unit) of the output, for tables and plots.
    measures : dict of str to ndarray, shape (p,) + out
        ``"nu"``, ``"mu"``, ``"mu_star"`` and ``"total_upper"``; each becomes
        the attribute of that name.
    intervals : dict of str to ndarray, shape (2, p) + out
        Their bootstrap intervals (lower, upper), same keys; each becomes the
        attribute ``<key>_ci``.
    aggregate, aggregate_ci : ndarray, shape (p,) and (2, p)
        The variance-weighted bound over all output entries and its interval
        (``total_upper_aggregate``, ``total_upper_aggregate_ci``).
    constants : ndarray, shape (p,)
        Poincaré constants.
    mean, variance : ndarray, shape out
        Of the model output over the samples used.
    samples : ndarray, shape (n, p)
        All samples, including dropped ones.
    outputs : ndarray, shape (n,) + out
        Model values at the samples.
    dropped : sequence of int
        Indices of the samples left out of the measures.
    dual_runs : int
        Runs of the model with dual numbers.
    conf_level : float
        Level of the intervals, e.g. 0.95.

    Attributes
    ----------
    names : tuple of str
        The parameters, in the problem's order.
    dists : tuple of str
        Their distributions.
    nu : ndarray, shape (p,) + out
        DGSM ``nu_i = E[(df/dx_i)^2]`` (units of output^2 / parameter^2).
    mu, mu_star : ndarray, shape (p,) + out
        Mean derivative ``E[df/dx_i]`` (its sign says the direction of the
        effect) and mean absolute derivative ``E[|df/dx_i|]`` (Morris-like).
    nu_normalized : ndarray, shape (p,) + out
        ``nu_i / sum_j nu_j``. Only comparable across parameters of the same
        units and spread; prefer ``total_upper``.
    total_upper : ndarray, shape (p,) + out
        Upper bound on the total Sobol index, ``C_i nu_i / Var(f)`` with
        ``C_i`` the Poincaré constant (:func:`dualgpu.sensitivity.poincare_constant`);
        dimensionless, comparable across parameters. NaN where the output does
        not vary.
    nu_ci, mu_ci, mu_star_ci, total_upper_ci : ndarray, shape (2, p) + out
        Bootstrap confidence intervals (lower, upper) at ``conf_level``.
    total_upper_aggregate, total_upper_aggregate_ci : ndarray, shape (p,), (2, p)
        For field outputs: the variance-weighted bound over all cells,
        ``C_i sum_c nu_ic / sum_c Var_c`` (a bound on the aggregated total
        index of Gamboa et al. 2014); for a scalar output, equal to
        ``total_upper``.
    constants : ndarray, shape (p,)
        Poincaré constants.
    mean, variance : ndarray, shape out
        Of the model output over the samples used.
    samples : ndarray, shape (n, p)
        All samples (including dropped ones).
    outputs : ndarray, shape (n,) + out
        Model values at the samples (NaN at dropped ones).
    dropped : tuple of int
        Samples left out because their derivatives were not finite.
    n_used : int
        Samples in the measures.
    dual_runs : int
        Runs of the model with dual numbers that produced the derivatives.
    conf_level : float
    sobol_total, sobol_total_ci : ndarray or None
        SALib's Sobol total index and its half-width, when attached
        (``attach_sobol``).

    Examples
    --------
    >>> from dualgpu.sensitivity import dgsm
    >>> problem = {"names": ["a", "b"], "bounds": [[-1, 1], [-1, 1]]}
    >>> r = dgsm(lambda X: 2 * X[:, 0] + X[:, 1], problem, 256, seed=0, batched=True,
    ...          units={"a": "m"}, output_name="y")
    >>> r
    <DGSMResult: 2 parameters, output shape (), 256 samples>
    >>> r.ranking(), r.nu.tolist(), r.mu.tolist()
    (['a', 'b'], [4.0, 1.0], [2.0, 1.0])
    >>> r.total_upper.round(3).tolist(), r.total_upper_ci.shape
    ([0.969, 0.242], (2, 2))
    >>> r.separates(), r.n_used, r.dual_runs
    (True, 256, 1)
    >>> print(r.table().splitlines()[0])
    DGSM of y: 256 samples, 1 dual run(s)
    """

    def __init__(self, *, names, dists, units, output_name, measures, intervals, aggregate,
                 aggregate_ci, constants, mean, variance, samples, outputs, dropped, dual_runs,
                 conf_level):
        self.names = tuple(names)
        self.dists = tuple(dists)
        self.units = dict(units or {})
        self.output_name = output_name
        for key in _MEASURES:
            setattr(self, key, measures[key])
            setattr(self, key + "_ci", intervals[key])
        total = self.nu.sum(axis=0, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.nu_normalized = np.where(total > 0, self.nu / total, np.nan)
        self.total_upper_aggregate = aggregate
        self.total_upper_aggregate_ci = aggregate_ci
        self.constants = constants
        self.mean = mean
        self.variance = variance
        self.samples = samples
        self.outputs = outputs
        self.dropped = tuple(int(i) for i in dropped)
        self.n_used = samples.shape[0] - len(self.dropped)
        self.dual_runs = dual_runs
        self.conf_level = conf_level
        self.sobol_total = self.sobol_total_ci = None

    @property
    def p(self):
        """Number of parameters."""
        return len(self.names)

    @property
    def output_shape(self):
        """Shape of one model output (``()`` for a scalar)."""
        return self.nu.shape[1:]

    def attach_sobol(self, total, conf=None):
        """Keep SALib's Sobol total indices (``Si["ST"]``, ``Si["ST_conf"]``) for tables and plots.

        Parameters
        ----------
        total : array_like, shape (p,) + out
        conf : array_like, optional
            Half-widths of their confidence intervals.

        Returns
        -------
        DGSMResult
            ``self``.
        """
        total = np.asarray(total, dtype=np.float64)
        if total.shape != self.nu.shape:
            raise DualgpuError(
                f"attach_sobol: total has shape {total.shape}; expected {self.nu.shape}, one "
                "index per parameter (and output entry), in the problem's order.")
        self.sobol_total = total
        self.sobol_total_ci = None if conf is None else np.asarray(conf, dtype=np.float64)
        return self

    def _pick(self, key, output):
        """Measure ``key`` and its interval as ``(p,)`` arrays for one output entry."""
        if output is None:
            if self.output_shape == ():
                return getattr(self, key), getattr(self, key + "_ci")
            if key == "total_upper":
                return self.total_upper_aggregate, self.total_upper_aggregate_ci
            raise DualgpuError(
                f"DGSMResult: the output has shape {self.output_shape}; give output= (an index "
                f"into it, e.g. output={tuple(0 for _ in self.output_shape)}) to pick one entry.")
        index = (slice(None),) + (output if isinstance(output, tuple) else (output,))
        try:
            value = getattr(self, key)[index]
            ci = getattr(self, key + "_ci")[(slice(None),) + index]
        except IndexError:
            raise DualgpuError(
                f"DGSMResult: output={output!r} is not an index into the output shape "
                f"{self.output_shape}.") from None
        if value.shape != (self.p,):
            raise DualgpuError(
                f"DGSMResult: output={output!r} selects shape {value.shape[1:]}; expected one "
                f"entry of the output shape {self.output_shape}.")
        return value, ci

    def _sobol(self, output):
        """The attached Sobol total indices and their half-widths for one output entry.

        ``(sobol_total, sobol_total_ci)`` indexed at ``[:, output]`` (whole when ``output`` is
        None); either is None when it was not attached.
        """
        return _entry(self.sobol_total, output), _entry(self.sobol_total_ci, output)

    def ranking(self, output=None):
        """Return the parameter names, most influential first (by ``total_upper``).

        For a field output without ``output=``, by the variance-weighted bound
        over all cells.
        """
        value, _ = self._pick("total_upper", output)
        order = np.argsort(-np.nan_to_num(value, nan=-np.inf), kind="stable")
        return [self.names[i] for i in order]

    def separates(self, top=None, output=None, measure="total_upper"):
        """True when the intervals of the ``top`` best-ranked parameters do not overlap.

        Each of the first ``top`` parameters in :meth:`ranking` (default: all)
        must have its lower end above the upper end of the next one.
        """
        value, ci = self._pick(measure, output)
        order = np.argsort(-value, kind="stable")
        top = self.p if top is None else min(int(top), self.p)
        return all(ci[0, order[j]] > ci[1, order[j + 1]] for j in range(min(top, self.p - 1)))

    def table(self, output=None):
        """Return a plain-text table, parameters ranked by the bound on the total index."""
        level = f"{self.conf_level:.0%}"
        rows = []
        nu, nu_ci = self._pick("nu", output) if (output is not None
                                                 or self.output_shape == ()) else (None, None)
        tu, tu_ci = self._pick("total_upper", output)
        mu = self._pick("mu", output)[0] if nu is not None else None
        mus = self._pick("mu_star", output)[0] if nu is not None else None
        order = np.argsort(-np.nan_to_num(tu, nan=-np.inf), kind="stable")
        header = ["rank", "parameter", "dist"]
        if nu is not None:
            header += [f"nu [{level} CI]", "mu", "mu*"]
        header += [f"S_tot <= [{level} CI]"]
        sobol = None
        if self.sobol_total is not None and (output is not None or self.output_shape == ()):
            sobol, sobol_ci = self._sobol(output)
            header += ["Sobol ST (SALib)"]
        for r, i in enumerate(order, 1):
            unit = self.units.get(self.names[i])
            row = [str(r), self.names[i] + (f" [{unit}]" if unit else ""), self.dists[i]]
            if nu is not None:
                row += [f"{_fmt(nu[i])} [{_fmt(nu_ci[0, i])}, {_fmt(nu_ci[1, i])}]",
                        f"{mu[i]:+.3g}", _fmt(mus[i])]
            row += [f"{_fmt(tu[i])} [{_fmt(tu_ci[0, i])}, {_fmt(tu_ci[1, i])}]"]
            if sobol is not None:
                conf = "" if sobol_ci is None else f" ± {_fmt(sobol_ci[i])}"
                row += [f"{_fmt(sobol[i])}{conf}"]
            rows.append(row)
        widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(header)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        what = self.output_name or "the output"
        if output is None and self.output_shape != ():
            what += (f" (field {self.output_shape}: bound weighted by each cell's variance; "
                     "pick a cell with output=)")
        elif output is not None:
            what += f", entry {output}"
        title = (f"DGSM of {what}: {self.n_used} samples, {self.dual_runs} dual run(s)"
                 + (f", {len(self.dropped)} dropped (non-finite)" if self.dropped else ""))
        return "\n".join([title] + lines)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return (f"<DGSMResult: {self.p} parameters, output shape {self.output_shape}, "
                f"{self.n_used} samples>")

    def to_dataframe(self, output=None):
        """Return the table as a pandas DataFrame (one row per parameter).

        Raises
        ------
        DualgpuError
            When pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise DualgpuError("to_dataframe needs pandas; install it (pip install pandas) or "
                               "use .table().") from None
        columns = {"dist": list(self.dists)}
        keys = _MEASURES if (output is not None or self.output_shape == ()) else ("total_upper",)
        for key in keys:
            value, ci = self._pick(key, output)
            columns[key] = value
            columns[key + "_low"] = ci[0]
            columns[key + "_high"] = ci[1]
        if self.sobol_total is not None and self.output_shape == ():
            columns["sobol_total"] = self.sobol_total
        return pd.DataFrame(columns, index=pd.Index(self.names, name="parameter"))

    def plot(self, **kwargs):
        """Ranked bars with intervals (:func:`dualgpu.plot.dgsm_bars`)."""
        from dualgpu.plot.dgsm import dgsm_bars  # matplotlib is imported only to draw

        return dgsm_bars(self, **kwargs)

    def plot_maps(self, **kwargs):
        """Sensitivity maps of a field output (:func:`dualgpu.plot.dgsm_maps`)."""
        from dualgpu.plot.dgsm import dgsm_maps  # matplotlib is imported only to draw

        return dgsm_maps(self, **kwargs)


def _entry(array, output):
    """``array[:, output]`` (``array`` itself when ``output`` is None, None stays None)."""
    if array is None or output is None:
        return array
    return array[(slice(None),) + (output if isinstance(output, tuple) else (output,))]
