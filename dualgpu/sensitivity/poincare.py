"""Poincaré constants: the factor that turns a DGSM into a bound on the total Sobol index.

For an input ``X_i`` with law ``mu`` and a model ``f`` with variance ``D``,

    S_i^tot  <=  C(mu) * E[(df/dx_i)^2] / D,

where ``C(mu)`` is the Poincaré constant of ``mu``: the smallest ``C`` with
``Var(g(X)) <= C E[g'(X)^2]`` for every smooth ``g`` (Sobol' & Kucherenko 2009
for the uniform law; Lamboni, Iooss, Popelin & Gamboa 2013 for the general
link). The optimal ``C`` is ``1 / lambda_1``, the inverse of the first non-zero
eigenvalue of the Neumann problem ``-(rho u')' = lambda rho u`` on the support
(Roustant, Barthe & Iooss 2017).

==========  ===========================  ==================================================
law         constant                     source
==========  ===========================  ==================================================
uniform     ``(b - a)**2 / pi**2``       Sobol' & Kucherenko (2009); closed form
normal      ``sd**2``                    Lamboni et al. (2013), Table 1; closed form
triangular  ``kappa(peak) (end-start)^2``  no closed form known: computed here numerically
                                         as ``1/lambda_1`` of the weighted Neumann problem
                                         (P1 finite elements, two meshes and Richardson
                                         extrapolation), the method of Roustant et al.
                                         (2017); ``Var(X) <= C <= (end-start)^2/pi^2``
                                         (the triangle is log-concave: Payne-Weinberger)
lognormal   none in ``x``                the lognormal law has no Poincaré constant (its
                                         tail fails Muckenhoupt's criterion, so no finite
                                         ``C`` exists). Sobol indices do not change under
                                         the bijection ``z = ln x`` and ``z`` is normal,
                                         so the bound is taken in ``z``: ``C = sd_ln**2``
                                         applied to ``E[(x df/dx)^2]`` (a *weighted* DGSM,
                                         Lamboni et al. 2013, Sec. 3)
==========  ===========================  ==================================================

References
----------
* I. M. Sobol' and S. Kucherenko (2009). Derivative based global sensitivity
  measures and their link with global sensitivity indices. Math. Comput. Simul.
  79(10):3009-3017.
* M. Lamboni, B. Iooss, A.-L. Popelin and F. Gamboa (2013). Derivative-based
  global sensitivity measures: general links with Sobol' indices and numerical
  tests. Math. Comput. Simul. 87:45-54.
* O. Roustant, F. Barthe and B. Iooss (2017). Poincaré inequalities on
  intervals - application to sensitivity analysis. Electron. J. Statist.
  11(2):3081-3119.

Examples
--------
>>> import math
>>> from dualgpu.sensitivity import poincare_constant
>>> poincare_constant("unif", (0.0, math.pi))
1.0
>>> poincare_constant("norm", (3.0, 2.0))
4.0
>>> round(poincare_constant("triang", (0.0, 1.0, 0.5)), 4)
0.0432
"""
from __future__ import annotations

from typing import Any, Sequence
import functools
import math

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as sparse_linalg

from dualgpu.errors import DualgpuError

__all__ = ["poincare_constant", "weighted_derivative"]

_MESH = 2000  # elements of the coarse mesh of the triangular eigenproblem (the fine has 2x)


def _neumann_lambda1(density_nodes, x):
    """First non-zero eigenvalue of -(rho u')' = lambda rho u, Neumann, P1 elements.

    ``rho`` is linear on each element (exact element integrals).
    """
    h = np.diff(x)
    r0, r1 = density_nodes[:-1], density_nodes[1:]
    k = (r0 + r1) / (2.0 * h)
    m00, m01, m11 = h * (3 * r0 + r1) / 12, h * (r0 + r1) / 12, h * (r0 + 3 * r1) / 12
    zero = np.zeros(1)
    K = sparse.diags([-k, np.concatenate([k, zero]) + np.concatenate([zero, k]), -k],
                     [-1, 0, 1], format="csc")
    M = sparse.diags([m01, np.concatenate([m00, zero]) + np.concatenate([zero, m11]), m01],
                     [-1, 0, 1], format="csc")
    # shift-invert about a negative shift: K + M is positive definite, the two smallest
    # eigenvalues are 0 (constants) and lambda_1
    values = sparse_linalg.eigsh(K, k=2, M=M, sigma=-1.0, which="LM",
                                 return_eigenvectors=False)
    return float(np.max(values))


def _triangle_lambda1(peak, elements):
    # nodes on [0, 1] with the mode among them, so the density is linear on each element
    left = max(1, round(elements * peak)) if peak > 0 else 0
    right = elements - left
    xs = []
    if left:
        xs.append(np.linspace(0.0, peak, left + 1))
    if right:
        xs.append(np.linspace(peak, 1.0, right + 1)[1 if left else 0:])
    x = np.concatenate(xs)
    rho = np.where(x <= peak, 2 * x / peak if peak > 0 else 2.0,
                   2 * (1 - x) / (1 - peak) if peak < 1 else 2.0)
    if peak == 0:
        rho = 2 * (1 - x)
    elif peak == 1:
        rho = 2 * x
    return _neumann_lambda1(rho, x)


@functools.lru_cache(maxsize=256)
def _triangle_kappa(peak):
    """Poincaré constant of the triangular law on [0, 1] with mode ``peak``."""
    coarse = _triangle_lambda1(peak, _MESH)
    fine = _triangle_lambda1(peak, 2 * _MESH)
    lam = fine + (fine - coarse) / 3.0  # Richardson: the P1 error is O(h^2)
    return 1.0 / lam


def poincare_constant(dist: Any, bounds: Sequence[float]) -> float:
    """Return the Poincaré constant ``C`` of one parameter's distribution.

    Parameters
    ----------
    dist : {"unif", "norm", "lognorm", "triang"}
        SALib's distribution name.
    bounds : sequence of float
        SALib's bounds for it (see :func:`dualgpu.sensitivity.check_problem`).

    Returns
    -------
    float
        ``C`` such that ``S_i^tot <= C E[g_i^2] / Var(f)``, with ``g_i`` the
        derivative ``df/dx_i`` (for ``lognorm``: ``x_i df/dx_i``, see
        ``weighted_derivative`` and the module docstring).

    Raises
    ------
    DualgpuError
        For an unknown distribution.

    Examples
    --------
    >>> import math
    >>> poincare_constant("unif", (0.0, math.pi))  # (b - a)**2 / pi**2
    1.0
    >>> poincare_constant("norm", (300.0, 5.0))  # sd**2
    25.0
    >>> poincare_constant("lognorm", (0.0, 0.5))  # sd**2 of ln x, for x df/dx
    0.25

    The triangular constant is computed, and lies between the variance and the
    uniform law's constant on the same support:

    >>> c = poincare_constant("triang", (0.0, 2.0, 0.5))
    >>> round(c, 4), 2.0 ** 2 / 24 < c < 2.0 ** 2 / math.pi ** 2
    (0.1729, True)
    """
    b = [float(v) for v in bounds]
    if dist == "unif":
        return (b[1] - b[0]) ** 2 / math.pi ** 2
    if dist in ("norm", "lognorm"):
        return b[1] ** 2
    if dist == "triang":
        if len(b) == 2:
            b = [0.0] + b
        return _triangle_kappa(float(b[2])) * (b[1] - b[0]) ** 2
    raise DualgpuError(
        f"poincare_constant: unknown distribution {dist!r}; expected 'unif', 'norm', "
        "'lognorm' or 'triang'.")


def weighted_derivative(dists, X, G):
    """Return the derivatives the bound uses: ``G`` with lognormal columns times ``x``.

    Parameters
    ----------
    dists : sequence of str
        One distribution per parameter.
    X : ndarray, shape (n, p)
        The samples.
    G : ndarray, shape (n, p, ...)
        ``G[s, i, ...]`` is ``df/dx_i`` at sample ``s``.

    Returns
    -------
    ndarray
        Like ``G``; a new array when a parameter is lognormal, else ``G`` itself.
    """
    logs = [i for i, d in enumerate(dists) if d == "lognorm"]
    if not logs:
        return G
    W = np.array(G, dtype=np.float64, copy=True)
    extra = (1,) * (W.ndim - 2)
    for i in logs:
        W[:, i] *= X[:, i].reshape((-1,) + extra)
    return W
