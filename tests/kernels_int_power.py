"""Kernels with integer powers that divide at zero (tests/test_int_power.py)."""
from dualgpu import cuda  # was: from numba import cuda


@cuda.jit
def negative_powers(x, a, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i, 0] = x[i] ** -1
        out[i, 1] = x[i] ** -2
        out[i, 2] = x[i] ** -3
        out[i, 3] = a ** -1
        n = -2
        out[i, 4] = x[i] ** n + x[i] ** 2
