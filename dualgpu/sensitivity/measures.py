"""DGSM measures from derivatives at samples, and :func:`dgsm`, the one-call analysis.

For parameter ``i`` and every output entry, over the samples ``x^(s)``:

* ``nu_i = E[(df/dx_i)^2]`` (Sobol' & Kucherenko 2009),
* ``mu_i = E[df/dx_i]`` and ``mu*_i = E[|df/dx_i|]`` (Morris-like, from exact
  derivatives instead of elementary effects),
* ``total_upper_i = C_i E[(df/dx_i)^2] / Var(f) >= S_i^tot``, the upper bound on
  the total Sobol index with ``C_i`` the Poincaré constant of ``x_i``'s law
  (:func:`dualgpu.sensitivity.poincare_constant`; lognormal parameters use the weighted
  derivative ``x_i df/dx_i``).

The bound is tight for models additive and linear in ``x_i`` (uniform and
normal laws: equality for a linear model with normal inputs) and loose for
strongly non-linear ones; a small bound proves a parameter unimportant, a
large one says "possibly important" — compare with a Sobol index when in
doubt (:func:`dualgpu.sensitivity.salib_sobol`).
"""
from __future__ import annotations

from typing import Any, Callable
import numpy.typing as npt
import warnings

import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.sensitivity.bootstrap import bootstrap_intervals
from dualgpu.sensitivity.gradients import model_gradients
from dualgpu.sensitivity.poincare import poincare_constant, weighted_derivative
from dualgpu.sensitivity.problem import check_problem
from dualgpu.sensitivity.result import DGSMResult
from dualgpu.sensitivity.sampling import sample

__all__ = ["analyze", "dgsm", "NON_FINITE_POLICIES"]

NON_FINITE_POLICIES = ("raise", "drop")
_LISTED = 5


def _check_options(resamples, conf_level, non_finite):
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) \
            or resamples < 10:
        raise DualgpuError(f"resamples must be an int >= 10; got {resamples!r}.")
    if not 0 < conf_level < 1:
        raise DualgpuError(f"conf_level must be in (0, 1), e.g. 0.95; got {conf_level!r}.")
    if non_finite not in NON_FINITE_POLICIES:
        raise DualgpuError(
            f"non_finite must be 'raise' (the default) or 'drop' (leave those samples out, "
            f"with a warning); got {non_finite!r}.")


def _bad_samples(X, Y, G):
    n = X.shape[0]
    flat_y = Y.reshape(n, -1)
    flat_g = G.reshape(n, -1)
    return np.flatnonzero(~(np.isfinite(flat_y).all(axis=1) & np.isfinite(flat_g).all(axis=1)))


def _non_finite_report(problem, X, bad):
    shown = "; ".join(
        f"sample {s}: " + ", ".join(f"{name}={X[s, i]:.6g}" for i, name in
                                    enumerate(problem.names)) for s in bad[:_LISTED])
    more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
    return (f"the model's value or derivatives are non-finite at {len(bad)} of {X.shape[0]} "
            f"samples ({shown}{more})")


def analyze(problem: Any, X: npt.ArrayLike, Y: npt.ArrayLike, G: npt.ArrayLike, *,
            resamples: int = 1000, conf_level: float = 0.95, seed: int | None = None,
            non_finite: str = "raise", dual_runs: int = 0, units: Any = None,
            output_name: str | None = None) -> DGSMResult:
    """Return the DGSM measures of given samples, outputs and derivatives.

    Use it with derivatives you already have, e.g. from SALib's samples;
    :func:`dgsm` samples, differentiates and calls it.

    Parameters
    ----------
    problem : dict or Problem
        SALib problem dictionary.
    X : array_like, shape (n, p)
        Samples.
    Y : array_like, shape (n,) + out
        Model values.
    G : array_like, shape (n, p) + out
        ``G[s, i]`` = ``df/dx_i`` at sample ``s``.
    resamples : int
        Bootstrap resamples for the intervals.
    conf_level : float
        Level of the intervals.
    seed : int or numpy.random.Generator, optional
        Seeds the bootstrap.
    non_finite : {"raise", "drop"}
        What to do when values or derivatives are NaN/inf at some samples:
        raise (naming them), or leave them out with a :class:`RuntimeWarning`
        that names them (``result.dropped`` lists them).
    dual_runs : int
        Recorded in the result.
    units : dict of str to str, optional
        Units of the parameters, for tables and plots.
    output_name : str, optional
        Name (and unit) of the output, for tables and plots.

    Returns
    -------
    DGSMResult

    Raises
    ------
    DualgpuError
        For shapes that disagree, too few samples, or non-finite values with
        ``non_finite="raise"``.

    Examples
    --------
    >>> import numpy as np
    >>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    >>> X = np.random.default_rng(0).random((256, 2))
    >>> G = np.tile([3.0, 1.0], (256, 1))            # f = 3a + b
    >>> r = analyze(problem, X, X @ [3.0, 1.0], G, seed=0)
    >>> r.nu.tolist(), r.ranking()
    ([9.0, 1.0], ['a', 'b'])
    """
    problem = check_problem(problem)
    _check_options(resamples, conf_level, non_finite)
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != problem.p:
        raise DualgpuError(f"analyze: X has shape {X.shape}; expected (n, {problem.p}).")
    n = X.shape[0]
    out = Y.shape[1:]
    if Y.shape[:1] != (n,) or G.shape != (n, problem.p) + out:
        raise DualgpuError(
            f"analyze: X {X.shape}, Y {Y.shape} and G {G.shape} disagree; expected Y of shape "
            f"({n},) + out and G of shape ({n}, {problem.p}) + out.")
    bad = _bad_samples(X, Y, G)
    if bad.size:
        report = _non_finite_report(problem, X, bad)
        if non_finite == "raise":
            raise DualgpuError(
                f"dgsm: {report}. Averaging them would give a wrong measure. Fix: make the model "
                "finite over the whole parameter range (narrow the bounds, stabilise the "
                "simulation), or pass non_finite='drop' to leave these samples out (with a "
                "warning; result.dropped lists them).")
        warnings.warn(f"dgsm: {report}; they are left out of the measures (non_finite='drop'; "
                      "result.dropped lists them).", RuntimeWarning, stacklevel=3)
    keep = np.setdiff1d(np.arange(n), bad)
    if keep.size < 2:
        raise DualgpuError(f"analyze: {keep.size} usable sample(s); expected at least 2.")
    Xk, Yk, Gk = X[keep], Y[keep], G[keep]
    m = int(np.prod(out, dtype=np.int64))
    Wk = weighted_derivative(problem.dists, Xk, Gk)
    C = np.array([poincare_constant(d, b) for d, b in zip(problem.dists, problem.bounds)])
    Gf, Wf, Yf = Gk.reshape(keep.size, problem.p, m), Wk.reshape(keep.size, problem.p, m), \
        Yk.reshape(keep.size, m)
    variance = Yf.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = C[:, None] * (Wf ** 2).mean(axis=0) / variance
        aggregate = C * (Wf ** 2).mean(axis=0).sum(axis=1) / variance.sum()
    bound[:, variance <= 0] = np.nan
    measures = {"nu": (Gf ** 2).mean(axis=0), "mu": Gf.mean(axis=0),
                "mu_star": np.abs(Gf).mean(axis=0), "total_upper": bound}
    intervals, aggregate_ci = bootstrap_intervals(Gf, Wf, Yf, C, int(resamples), conf_level,
                                                  seed)
    shape = (problem.p,) + out
    measures = {k: v.reshape(shape) for k, v in measures.items()}
    intervals = {k: v.reshape((2,) + shape) for k, v in intervals.items()}
    return DGSMResult(
        names=problem.names, dists=problem.dists, units=units, output_name=output_name,
        measures=measures, intervals=intervals, aggregate=aggregate, aggregate_ci=aggregate_ci,
        constants=C, mean=Yf.mean(axis=0).reshape(out), variance=variance.reshape(out),
        samples=X, outputs=Y, dropped=bad, dual_runs=dual_runs, conf_level=conf_level)


def dgsm(f: Callable[..., Any], problem: Any, n: int, *, seed: int | None = None,
         batched: bool = False, method: str = "sobol", dtype: npt.DTypeLike = np.float64,
         samples: npt.ArrayLike | None = None, resamples: int = 1000,
         conf_level: float = 0.95, non_finite: str = "raise", chunk_size: int | None = None,
         executor: Any = None, progress: bool | None = None, units: Any = None,
         output_name: str | None = None) -> DGSMResult:
    """Derivative-based global sensitivity of a model over its parameters' ranges.

    Samples the parameters (scrambled Sobol' points mapped to their
    distributions), differentiates the model exactly at every sample with
    dual numbers, and returns the DGSM ``nu``, ``mu``, ``mu*``, the upper
    bound on each total Sobol index and bootstrap intervals.

    Parameters
    ----------
    f : callable
        The model. ``batched=False``: ``f(x)`` of one parameter vector,
        shape ``(p,)``, returning a scalar or an array (a field); one dual run
        per sample. ``batched=True``: ``f(X)`` of all samples, shape
        ``(n, p)``, returning one output per sample along axis 0 (an ensemble,
        a thread per sample); **one** dual run for all samples, much faster
        when ``f`` is vectorised (see :func:`dualgpu.sensitivity.model_gradients`).
    problem : dict or Problem
        SALib's problem dictionary: ``names``, ``bounds``, optional ``dists``
        (``unif``, ``norm``, ``lognorm``, ``triang``; SALib's meaning of
        ``bounds`` per distribution).
    n : int
        Number of samples (a power of 2 for ``method="sobol"``). Ignored when
        ``samples`` is given.
    seed : int, optional
        Seeds the design and the bootstrap: the same seed, the same result.
    batched : bool
        The form of ``f``.
    method : {"sobol", "halton", "random"}
        The design (:func:`dualgpu.sensitivity.sample`).
    dtype : {numpy.float64, numpy.float32}
        The dtype of the samples handed to ``f`` (the model's precision); the
        measures are computed in float64.
    samples : array_like, shape (n, p), optional
        Use these samples instead of drawing (e.g. SALib's).
    resamples, conf_level : int, float
        Bootstrap resamples and interval level.
    non_finite : {"raise", "drop"}
        Samples where the value or a derivative is NaN/inf: raise an error
        naming them (default), or leave them out with a warning naming them.
    chunk_size : int, optional
        Tangent lanes per run (default: all ``p`` in one run).
    executor : dask.distributed.Client or concurrent.futures.Executor, optional
        Runs the lane chunks on its workers (:func:`dualgpu.jvp_batch`); with
        ``chunk_size=1`` each worker takes one parameter.
    progress : bool, optional
        Progress bar of a batched run.
    units : dict of str to str, optional
        Parameter units, shown in tables and plots.
    output_name : str, optional
        Name and unit of the output, e.g. ``"final angle [rad]"``.

    Returns
    -------
    DGSMResult

    Raises
    ------
    DualgpuError
        For a bad problem (unknown distribution, ``lo >= hi``, ...), a model
        whose output shape changes between samples, non-finite derivatives
        (with ``non_finite="raise"``), or a batched model without one output
        per sample.

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu.sensitivity import dgsm
    >>> problem = {"names": ["a", "b"], "bounds": [[-1, 1], [-1, 1]]}
    >>> r = dgsm(lambda X: 2 * X[:, 0] + X[:, 1] ** 2, problem, 256, seed=0, batched=True)
    >>> r.ranking(), float(r.nu[0])
    (['a', 'b'], 4.0)
    """
    problem = check_problem(problem)
    _check_options(resamples, conf_level, non_finite)
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise DualgpuError(f"dgsm: dtype must be float32 or float64; got {dtype}.")
    if samples is None:
        X = sample(problem, n, seed=seed, method=method)
    else:
        X = np.array(samples, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != problem.p:
            raise DualgpuError(
                f"dgsm: samples has shape {X.shape}; expected (n, {problem.p}), one column per "
                "parameter in the problem's order.")
    Xm = X.astype(dtype)
    Y, G, bad, runs = model_gradients(f, Xm, batched=batched, chunk_size=chunk_size,
                                      executor=executor, progress=progress)
    bootstrap_seed = None if seed is None else np.random.SeedSequence(seed).spawn(1)[0]
    return analyze(problem, Xm.astype(np.float64), Y, G, resamples=resamples,
                   conf_level=conf_level, seed=bootstrap_seed, non_finite=non_finite,
                   dual_runs=runs, units=units, output_name=output_name)
