"""SALib's Sobol indices of the same model: the cross-check of the DGSM bound.

The total Sobol index ``S_i^tot`` must lie below the DGSM bound
``total_upper_i``. SALib estimates it with Saltelli's design, which needs
``N (p + 2)`` model runs for ``N`` base samples (no second-order indices).
"""
from __future__ import annotations

from typing import Any, Callable
import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.sensitivity.problem import check_problem

__all__ = ["salib_sobol"]


def salib_sobol(f: Callable[..., Any], problem: Any, n: int, *, seed: int | None = None,
                batched: bool = False, resamples: int = 100,
                conf_level: float = 0.95) -> Any:
    """Return SALib's Sobol indices of ``f`` (first and total order) and the runs they took.

    Parameters
    ----------
    f : callable
        The plain model (no derivatives): ``f(x)`` of one parameter vector, or
        with ``batched=True`` ``f(X)`` of all samples, shape ``(n, p)``,
        returning one output per row.
    problem : dict or Problem
        SALib problem dictionary.
    n : int
        SALib's base sample size ``N`` (a power of 2).
    seed : int, optional
        Seeds SALib's design and bootstrap.
    batched : bool
        The form of ``f``.
    resamples, conf_level : int, float
        SALib's bootstrap.

    Returns
    -------
    dict
        ``"S1"``, ``"S1_conf"``, ``"ST"``, ``"ST_conf"`` of shape ``(p,) + out``
        (``*_conf``: half-widths of the intervals) and ``"evaluations"``, the
        model runs, ``n (p + 2)``.

    Raises
    ------
    DualgpuError
        When SALib is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> problem = {"names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    >>> Si = salib_sobol(lambda X: 3 * X[:, 0] + X[:, 1], problem, 256, seed=0, batched=True)
    >>> Si["evaluations"], bool(Si["ST"][0] > Si["ST"][1])
    (1024, True)
    """
    try:
        from SALib.analyze import sobol as sobol_analyze
        from SALib.sample import sobol as sobol_sample
    except ImportError:
        raise DualgpuError("salib_sobol needs SALib: pip install SALib.") from None
    problem = check_problem(problem)
    salib_problem = problem.as_dict()
    X = sobol_sample.sample(salib_problem, n, calc_second_order=False, seed=seed)
    if batched:
        Y = np.asarray(f(X), dtype=np.float64)
    else:
        Y = np.stack([np.asarray(f(x), dtype=np.float64) for x in X])
    if Y.shape[0] != X.shape[0]:
        raise DualgpuError(
            f"salib_sobol: f returned {Y.shape[0]} outputs for {X.shape[0]} samples; expected "
            "one per sample (row).")
    out = Y.shape[1:]
    flat = Y.reshape(X.shape[0], -1)
    keys = ("S1", "S1_conf", "ST", "ST_conf")
    result = {k: np.empty((problem.p, flat.shape[1])) for k in keys}
    for c in range(flat.shape[1]):
        Si = sobol_analyze.analyze(salib_problem, flat[:, c], calc_second_order=False,
                                   num_resamples=resamples, conf_level=conf_level, seed=seed)
        for k in keys:
            result[k][:, c] = Si[k]
    result = {k: v.reshape((problem.p,) + out) for k, v in result.items()}
    result["evaluations"] = int(X.shape[0])
    return result
