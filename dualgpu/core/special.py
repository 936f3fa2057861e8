"""Special functions the rule table's derivatives call: ``digamma``, the derivative of ``lgamma``.

``math.lgamma`` and ``math.gamma`` run in numba.cuda kernels, so they need rules; their
derivatives are ``digamma(x)`` and ``gamma(x) * digamma(x)``, and ``digamma`` is in neither
``math`` nor numba. It is written here once, as an algorithm in ``log`` and ``tan``
(:func:`digamma_with`), and each path binds those to what it runs on:

* compiled code (numba on the CPU and CUDA): ``math``'s, on floats and on compiled duals, so
  a nested dual (a Hessian) differentiates the algorithm itself;
* the pure-Python dual: numpy's, which take Python duals too (:func:`digamma_scalar`);
* host arrays and numpy scalars: :func:`digamma_numpy`, elementwise, the dtype kept.

The algorithm: the reflection ``psi(x) = psi(1 - x) - pi / tan(pi x)`` below 1/2, the
recurrence ``psi(x) = psi(x + 1) - 1/x`` up to 10, then the asymptotic series to ``x**-12``
(truncation below 1e-15 there). Poles (0, -1, -2, ...) and infinities give NaN.
"""
import math

import numpy as np
from numba.core.extending import register_jitable

__all__ = ["digamma_with", "digamma_scalar", "digamma_numpy"]

#: the series starts where the recurrence stops
_SHIFT = 10.0


@register_jitable
def _series(f):
    """The asymptotic series' terms in ``f = 1 / x**2`` past ``log(x) - 1 / 2x``: Bernoulli
    numbers B_2k / 2k up to x**-12 (numba compiles it too, on floats and duals)."""
    return f * (0.08333333333333333 - f * (0.008333333333333333 - f * (
        0.003968253968253968 - f * (0.004166666666666667 - f * 0.007575757575757576))))


def digamma_with(log, tan):
    """``digamma(x)`` computed with the functions given (see the module docstring).

    Examples
    --------
    >>> import math
    >>> digamma = digamma_with(math.log, math.tan)
    >>> round(digamma(1.0), 12)  # -Euler's gamma
    -0.577215664902
    """

    def digamma(x):
        result = x * 0.0
        # a pole (0, -1, ...; every float below -2**52): x % 1.0, not floor, which compiled
        # code gives as an int64 that a float32 beyond -2**63 overflows (a finite derivative)
        if x <= 0.0 and x % 1.0 == 0.0:
            return result + math.nan
        if x < 0.5:
            result = result - math.pi / tan(math.pi * x)
            x = 1.0 - x
        while x < _SHIFT:
            result = result - 1.0 / x
            x = x + 1.0
        return result + log(x) - 0.5 / x - _series(1.0 / (x * x))

    return digamma


#: the pure-Python dual's (numpy's functions take numpy scalars and Python duals)
digamma_scalar = digamma_with(np.log, np.tan)


def digamma_numpy(x):
    """``digamma`` elementwise on a float array or numpy scalar, in its dtype (float64 for
    other inputs).

    Examples
    --------
    >>> import numpy as np
    >>> digamma_numpy(np.array([1.0, 2.0], np.float32))
    array([-0.5772157 ,  0.42278433], dtype=float32)
    """
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    with np.errstate(all="ignore"):
        v = x.astype(np.float64)
        pole = (v <= 0.0) & (v == np.floor(v))
        reflect = v < 0.5
        result = np.where(reflect, -math.pi / np.tan(math.pi * v), 0.0)
        v = np.where(reflect, 1.0 - v, v)
        while True:
            low = v < _SHIFT
            if not low.any():
                break
            result = result - np.where(low, 1.0 / v, 0.0)
            v = np.where(low, v + 1.0, v)
        result = result + np.log(v) - 0.5 / v - _series(1.0 / (v * v))
        result = np.where(pole | np.isinf(x), np.nan, result)
    return result.astype(dtype)[()]
