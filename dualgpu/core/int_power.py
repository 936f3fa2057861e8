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
from numba.extending import overload, register_jitable

__all__ = ["float_int_power", "power"]


@register_jitable
def float_int_power(a, b):
    """``a ** b`` for a float ``a`` and an int ``b``: numba's algorithm, numpy's zero.

    Parameters
    ----------
    a : float
    b : int

    Returns
    -------
    float
        ``a ** b``; ``±inf`` (the sign of ``a ** |b|``) where ``a`` is zero and ``b < 0``.
    """
    r = a * 0 + 1  # 1 in a's type (float32 stays float32)
    x = a
    exp = -b if b < 0 else b
    if exp > 0x10000:
        return math.pow(a, float(b))
    while exp != 0:
        if exp & 1:
            r *= x
        exp >>= 1
        x *= x
    if b < 0:
        if r == 0:
            return math.copysign(math.inf, r) * (a * 0 + 1)
        return 1 / r
    return r


def power(a, b):
    """``a ** b`` as a kernel computes it (see the module docstring)."""
    return a ** b


@overload(power, target="cpu", jit_options={"inline": "always"})
def _ov_power(a, b):
    if isinstance(a, types.Float) and isinstance(b, types.Integer):
        return lambda a, b: float_int_power(a, b)
    return lambda a, b: operator.pow(a, b)
