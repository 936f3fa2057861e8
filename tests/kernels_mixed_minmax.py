"""float32 kernels mixing float32 and float64 in max/min (tests/test_mixed_minmax.py)."""
import numpy as np

from dualgpu import cuda  # was: from numba import cuda

FLOOR64 = 0.25  # a Python float: float64 in the kernel


@cuda.jit
def clipped_energy(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        lo = np.float64(FLOOR64)
        v = u[i] * u[i]
        a = max(v, lo)                 # float32 dual, float64
        b = min(lo, u[i] * 3.0)        # float64, float32 dual
        c = max(v, 0.5, u[i])          # three arguments, mixed
        d = min(u[i], np.float32(2.0), lo)
        out[i] = a * b + c - d
