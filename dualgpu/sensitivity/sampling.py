"""Low-discrepancy samples of the parameters: scrambled Sobol' or Halton points, seeded.

Points of the unit cube from :mod:`scipy.stats.qmc` are mapped to each
parameter's distribution through its inverse CDF
(:meth:`dualgpu.sensitivity.Problem.ppf`). Scrambling makes the design random
(so that a bootstrap and repeated seeds make sense) while keeping its even
coverage; a Sobol' design is best balanced when ``n`` is a power of 2.
"""
from __future__ import annotations

from typing import Any
import numpy as np
from scipy.stats import qmc

from dualgpu.errors import DualgpuError
from dualgpu.sensitivity.problem import check_problem

__all__ = ["sample", "METHODS"]

METHODS = ("sobol", "halton", "random")
_EDGE = 1e-12  # unit-cube points are kept this far from 0 and 1 (unbounded laws: finite x)


def sample(problem: Any, n: int, seed: int | None = None, method: str = "sobol") -> np.ndarray:
    """Return ``n`` samples of the parameters, shape ``(n, p)``, float64.

    Parameters
    ----------
    problem : dict or Problem
        SALib problem dictionary (see :func:`dualgpu.sensitivity.check_problem`).
    n : int
        Number of samples (a power of 2 for ``"sobol"``).
    seed : int or numpy.random.Generator, optional
        Seeds the scrambling (``"sobol"``, ``"halton"``) or the draws
        (``"random"``); the same seed gives the same samples.
    method : {"sobol", "halton", "random"}
        Scrambled Sobol' points, scrambled Halton points, or independent draws.

    Returns
    -------
    ndarray, shape (n, p)

    Raises
    ------
    DualgpuError
        For ``n < 2``, an unknown method, or a Sobol' ``n`` that is not a
        power of 2.

    Examples
    --------
    >>> X = sample({"names": ["a", "b"], "bounds": [[0, 1], [10, 20]]}, 8, seed=1)
    >>> X.shape, bool((X[:, 1] >= 10).all() and (X[:, 1] <= 20).all())
    ((8, 2), True)
    """
    problem = check_problem(problem)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise DualgpuError(f"sample: n must be an int >= 2; got {n!r}.")
    n = int(n)
    if method == "sobol":
        if n & (n - 1):
            lower = 1 << (n.bit_length() - 1)
            raise DualgpuError(
                f"sample: a Sobol' design of n={n} points loses its balance; expected a power "
                f"of 2. Fix: n={lower} or n={2 * lower}, or method='halton'.")
        u = qmc.Sobol(problem.p, scramble=True, seed=seed).random_base2(n.bit_length() - 1)
    elif method == "halton":
        u = qmc.Halton(problem.p, scramble=True, seed=seed).random(n)
    elif method == "random":
        u = np.random.default_rng(seed).random((n, problem.p))
    else:
        raise DualgpuError(f"sample: method must be one of {METHODS}; got {method!r}.")
    return problem.ppf(np.clip(u, _EDGE, 1 - _EDGE))
