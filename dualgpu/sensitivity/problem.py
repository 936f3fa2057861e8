"""Parameter descriptions in SALib's format: names, bounds and distributions.

A *problem* is the dictionary SALib takes::

    {"names": ["a", "b"], "bounds": [[0, 1], [2.0, 0.5]], "dists": ["unif", "norm"]}

``num_vars`` is optional (checked when given) and ``dists`` defaults to
``"unif"`` for every parameter. What ``bounds`` means depends on the
distribution, exactly as in SALib (``SALib.util._nonuniform_scale_samples``):

==========  ===========================  ==========================================
``dists``   ``bounds``                   distribution
==========  ===========================  ==========================================
``unif``    ``[lo, hi]``                 uniform on ``[lo, hi]``, ``lo < hi``
``norm``    ``[mean, sd]``               normal, ``sd > 0``
``lognorm`` ``[mean, sd]`` of ``ln x``   ``x = exp(z)``, ``z ~ N(mean, sd**2)``
``triang``  ``[start, end, peak]``       triangular on ``[start, end]``, mode at
                                         ``start + peak * (end - start)``,
                                         ``0 <= peak <= 1``; SALib's older
                                         two-value ``[end, peak]`` means
                                         ``start = 0``
==========  ===========================  ==========================================

Examples
--------
>>> from dualgpu.sensitivity import check_problem
>>> p = check_problem({"names": ["k", "T0"], "bounds": [[1, 2], [300.0, 5.0]],
...                    "dists": ["unif", "norm"]})
>>> p.names, p.dists
(('k', 'T0'), ('unif', 'norm'))
>>> p.ppf([[0.5, 0.5]])
array([[  1.5, 300. ]])
"""
from __future__ import annotations

from typing import Any
import math

import numpy as np
from scipy import stats

from dualgpu.errors import DualgpuError

__all__ = ["Problem", "check_problem", "DISTRIBUTIONS"]

#: Distributions this package supports, with what their ``bounds`` hold.
DISTRIBUTIONS = {
    "unif": "[lo, hi] with lo < hi",
    "norm": "[mean, standard deviation > 0]",
    "lognorm": "[mean, standard deviation > 0] of ln(x)",
    "triang": "[start, end, peak in 0..1] (peak as a fraction of end - start)",
}
_SALIB_ONLY = ("logunif", "truncnorm", "weibull")


#: ln of the largest float64: exp of more overflows
_LOG_MAX = math.log(np.finfo(np.float64).max)


def _finite(values, where):
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError):
        raise DualgpuError(f"{where}: expected real numbers; got {list(values)!r}.") from None
    if not all(math.isfinite(v) for v in out):
        raise DualgpuError(f"{where}: expected finite numbers; got {out!r}.")
    return out


class Problem:
    """A checked parameter description (see :func:`check_problem`).

    :func:`check_problem` builds it from a SALib dictionary after checking every entry;
    the constructor itself checks nothing, so build one directly only from values already
    checked (or pass it through :func:`check_problem`, which returns a Problem as it is).
    Every function of :mod:`dualgpu.sensitivity` that takes a problem accepts either.

    Parameters
    ----------
    names : sequence of str
        The parameters, in order.
    bounds : sequence of sequence of float
        One entry per parameter, meaning set by its distribution (see
        :data:`DISTRIBUTIONS`); triangular bounds with three values
        ``[start, end, peak]``.
    dists : sequence of str
        One of :data:`DISTRIBUTIONS` per parameter.

    Attributes
    ----------
    names : tuple of str
    dists : tuple of str
        One of :data:`DISTRIBUTIONS` per parameter.
    bounds : tuple of tuple of float
        As given (two-value triangular bounds completed to three values).
    p : int
        Number of parameters.

    Examples
    --------
    >>> from dualgpu.sensitivity import Problem
    >>> prob = Problem(["k", "T0"], [[1.0, 3.0], [300.0, 5.0]], ["unif", "norm"])
    >>> prob
    Problem(k: unif[1.0, 3.0], T0: norm[300.0, 5.0])
    >>> prob.p, prob.variances().tolist()
    (2, [0.3333333333333333, 25.0])
    >>> prob.ppf([[0.5, 0.5]])  # points of the unit cube to parameter values
    array([[  2., 300.]])
    >>> prob.as_dict()["bounds"]
    [[1.0, 3.0], [300.0, 5.0]]
    """

    def __init__(self, names, bounds, dists):
        self.names = tuple(names)
        self.bounds = tuple(tuple(b) for b in bounds)
        self.dists = tuple(dists)
        self.p = len(self.names)

    def as_dict(self):
        """Return the problem as a SALib dictionary (three-value triangular bounds)."""
        return {"num_vars": self.p, "names": list(self.names),
                "bounds": [list(b) for b in self.bounds], "dists": list(self.dists)}

    def _law(self, i):
        """``(scipy distribution, its parameters)`` of parameter ``i``."""
        dist, b = self.dists[i], self.bounds[i]
        if dist == "unif":
            return stats.uniform, {"loc": b[0], "scale": b[1] - b[0]}
        if dist == "norm":
            return stats.norm, {"loc": b[0], "scale": b[1]}
        if dist == "lognorm":
            return stats.lognorm, {"s": b[1], "scale": math.exp(b[0])}
        return stats.triang, {"c": b[2], "loc": b[0], "scale": b[1] - b[0]}

    def ppf(self, u):
        """Map points of the unit cube, shape ``(n, p)``, to the parameters' distributions."""
        u = np.asarray(u, dtype=np.float64)
        if u.ndim != 2 or u.shape[1] != self.p:
            raise DualgpuError(
                f"Problem.ppf: expected points of shape (n, {self.p}); got {u.shape}.")
        columns = []
        for i in range(self.p):
            law, params = self._law(i)
            columns.append(law.ppf(u[:, i], **params))
        return np.column_stack(columns)

    def variances(self):
        """Return the variance of each parameter, shape ``(p,)``."""
        return np.array([float(law.var(**params)) for law, params in map(self._law,
                                                                          range(self.p))])

    def __repr__(self):
        rows = ", ".join(f"{n}: {d}{list(b)}" for n, d, b in zip(self.names, self.dists,
                                                                 self.bounds))
        return f"Problem({rows})"


def check_problem(problem: Any) -> Problem:
    """Check a SALib problem dictionary and return it as a :class:`Problem`.

    Parameters
    ----------
    problem : dict or Problem
        ``names`` (list of str), ``bounds`` (one list per parameter, meaning
        set by its distribution, see the module docstring), optionally
        ``dists`` (default ``"unif"`` for all) and ``num_vars``. Never
        modified.

    Returns
    -------
    Problem

    Raises
    ------
    DualgpuError
        For missing keys, lengths that disagree, duplicate names, an unknown
        distribution, bounds with ``lo >= hi`` or non-positive spreads.

    Examples
    --------
    >>> check_problem({"names": ["x"], "bounds": [[1.0, 1.0]]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dualgpu.errors.DualgpuError: problem: parameter 'x' (unif) has bounds [1.0, 1.0] with ...
    """
    if isinstance(problem, Problem):
        return problem
    if not isinstance(problem, dict):
        raise DualgpuError(
            f"problem: expected a dict like SALib's {{'names': [...], 'bounds': [[lo, hi], ...]}}"
            f"; got {type(problem).__name__}.")
    for key in ("names", "bounds"):
        if key not in problem:
            raise DualgpuError(
                f"problem: the key {key!r} is missing; expected 'names' and 'bounds' (and "
                "optionally 'dists', 'num_vars') as in SALib.")
    names = list(problem["names"])
    if not names or not all(isinstance(n, str) for n in names):
        raise DualgpuError(f"problem: 'names' must be a non-empty list of str; got {names!r}.")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise DualgpuError(f"problem: parameter names must be unique; {dup} repeat.")
    p = len(names)
    if "num_vars" in problem and problem["num_vars"] != p:
        raise DualgpuError(
            f"problem: num_vars is {problem['num_vars']!r} but 'names' has {p} entries; "
            "expected them to agree.")
    if "groups" in problem and problem["groups"] is not None:
        raise DualgpuError("problem: 'groups' is not supported; give one entry per parameter.")
    bounds = list(problem["bounds"])
    dists = problem.get("dists") or ["unif"] * p
    if isinstance(dists, str):
        dists = [dists] * p
    dists = list(dists)
    for key, seq in (("bounds", bounds), ("dists", dists)):
        if len(seq) != p:
            raise DualgpuError(
                f"problem: {key!r} has {len(seq)} entries for {p} names; expected one per "
                "parameter.")
    checked = []
    for name, dist, b in zip(names, dists, bounds):
        if dist not in DISTRIBUTIONS:
            extra = (" SALib knows it, but dualgpu.sensitivity has no Poincaré constant for it "
                     "yet." if dist in _SALIB_ONLY else "")
            raise DualgpuError(
                f"problem: parameter {name!r} has the unknown distribution {dist!r}.{extra} "
                f"Expected one of {sorted(DISTRIBUTIONS)}: " + "; ".join(
                    f"{k}: {v}" for k, v in DISTRIBUTIONS.items()) + ".")
        where = f"problem: parameter {name!r} ({dist}) bounds"
        try:
            b = list(b)
        except TypeError:
            raise DualgpuError(f"{where}: expected a list; got {b!r}.") from None
        b = _finite(b, where)
        if dist == "triang" and len(b) == 2:
            b = [0.0, b[0], b[1]]  # SALib's older two-value form: start at 0
        want = 3 if dist == "triang" else 2
        if len(b) != want:
            raise DualgpuError(
                f"{where} have {len(b)} values {b}; expected {DISTRIBUTIONS[dist]}.")
        if dist == "unif" and not b[0] < b[1]:
            raise DualgpuError(
                f"problem: parameter {name!r} (unif) has bounds {b} with lo >= hi; expected "
                "[lo, hi] with lo < hi. Fix: give the lower bound first and make the interval "
                "non-empty.")
        if dist in ("norm", "lognorm") and not b[1] > 0:
            raise DualgpuError(
                f"{where} {b}: the standard deviation {b[1]} is not > 0; expected "
                f"{DISTRIBUTIONS[dist]}. Fix: a fixed parameter belongs outside the problem.")
        if dist == "lognorm" and 2 * (b[0] + b[1] ** 2) > _LOG_MAX:
            raise DualgpuError(
                f"{where} {b}: exp of the mean of ln x ({b[0]}) with the standard deviation "
                f"{b[1]} gives values whose squares (E[x^2] = exp(2 mean + 2 sd^2), which the "
                f"variance and the bound need) overflow float64 (above exp({_LOG_MAX:.1f})). "
                "Expected 2 * (mean + sd^2) < 709.78. Fix: express the parameter in a larger "
                "unit (ln x shifts by the log of the factor), or study ln x itself with 'norm'.")
        if dist == "triang":
            if not b[0] < b[1]:
                raise DualgpuError(
                    f"problem: parameter {name!r} (triang) has bounds {b} with start >= end; "
                    "expected [start, end, peak] with start < end and 0 <= peak <= 1.")
            if not 0.0 <= b[2] <= 1.0:
                raise DualgpuError(
                    f"{where} {b}: the peak {b[2]} is outside [0, 1]; expected it as a fraction "
                    "of end - start (SALib's convention), e.g. 0.5 for a symmetric triangle.")
        checked.append(b)
    return Problem(names, checked, dists)
