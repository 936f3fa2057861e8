"""0.0 ** -1 (integer exponent) under @njit(error_model="numpy"): plain numba raises
ZeroDivisionError (its integer power is compiled with Python's error model), the dual returns
inf. dualgpu/rules.py ZERO_DIVISION_ERRORS' docstring says "compiled CPU code raises for
0.0 ** -n under either error model ..., and so does a dual"."""
from numba import njit
from dualgpu.core.dual import Dual


def f(x, n):
    return x ** n


g = njit(error_model="numpy")(f)
for arg in (0.0, Dual(0.0, (1.0,))):
    try:
        print(type(arg).__name__, "->", g(arg, -1))
    except ZeroDivisionError as e:
        print(type(arg).__name__, "-> ZeroDivisionError:", e)
