"""``x ** n`` of a float and an integer with numpy's (and the GPU's) semantics at zero.

numba's CPU target raises ``ZeroDivisionError`` for ``0.0 ** -1`` even in code
compiled with ``error_model="numpy"`` (its integer-power helper inverts the
product in a function compiled with Python's error model), where numba.cuda and
numpy give ``inf`` (``-inf`` for ``-0.0`` to an odd power). The cpu backend
compiles ``a ** b`` in kernels as :func:`power`, and a dual's value uses
:func:`float_int_power`: the same products in the same order as numba's, so
every other result is bit for bit numba's.

Examples
--------
>>> from dualgpu.core.int_power import float_int_power
>>> float_int_power(0.0, -1), float_int_power(-0.0, -1), float_int_power(-0.0, -2)
(inf, -inf, inf)
>>> float_int_power(2.0, -2)
0.25
"""
import math
import operator

from numba import types
import numpy as np
from numba.extending import overload

__all__ = ["float_int_power", "power"]


def float_int_power(a, b):
    """``a ** b`` for a float ``a`` and an int ``b``: numba's algorithm, numpy's zero.

    Parameters
    ----------
    a : float
    b : int

    Returns
    -------
    float
        ``a ** b`` in ``a``'s type (float32 stays float32, as numba types it); ``±inf``
        (the sign of ``a ** |b|``) where ``a`` is zero and ``b < 0``.
    """
    return _float_int_power(a, b)  # pragma: no cover - replaced in compiled code


@overload(float_int_power)
def _ov_float_int_power(a, b):
    if not (isinstance(a, types.Float) and isinstance(b, types.Integer)):
        return None
    one = np.float32(1) if a == types.float32 else np.float64(1)  # a typed 1: a * 0 + 1 is nan
    inf = one * np.inf                                            # for an infinite a

    def impl(a, b):
        r = one
        x = a
        exp = -b if b < 0 else b
        if exp > 0x10000:
            return math.pow(a, type(one)(b))
        while exp != 0:
            if exp & 1:
                r *= x
            exp >>= 1
            x *= x
        if b < 0:
            if r == 0:
                return math.copysign(inf, r)
            return one / r
        return r

    return impl


def _float_int_power(a, b):
    """The Python value of :func:`float_int_power` (numpy's semantics)."""
    with np.errstate(divide="ignore", over="ignore"):
        if isinstance(a, np.floating):
            return np.power(a, type(a)(b))
        return float(np.power(np.float64(a), np.float64(b)))


def power(a, b):
    """``a ** b`` as a kernel computes it (see the module docstring)."""
    return a ** b


@overload(power, target="cpu", jit_options={"inline": "always"})
def _ov_power(a, b):
    if isinstance(a, types.Float) and isinstance(b, types.Integer):
        return lambda a, b: float_int_power(a, b)
    return lambda a, b: operator.pow(a, b)
