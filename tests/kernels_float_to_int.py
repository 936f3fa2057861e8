"""Kernels converting floats to ints with math.floor/ceil/trunc (tests/test_float_to_int.py)."""
import math
from math import floor

from dualgpu import cuda  # was: from numba import cuda


@cuda.jit
def rounded(x, ints, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        ints[i, 0] = math.floor(x[i])
        ints[i, 1] = math.ceil(x[i])
        ints[i, 2] = math.trunc(x[i])
        ints[i, 3] = floor(x[i])
        out[i] = 2.0 * x[i] + math.floor(0.5)
