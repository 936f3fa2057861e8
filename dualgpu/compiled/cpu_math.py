"""``math`` functions that numba.cuda compiles but numba's CPU target lacks.

The cpu backend runs CUDA kernels with ``@njit``; a kernel that calls
``math.fmod`` compiles for the GPU, so it must compile on the CPU too (so do
``math.remainder`` and ``math.modf``, the only other such functions in numba 0.68). These
overloads are registered for the CPU target only (numba-cuda keeps its own).
"""
import math

import numpy as np
from numba import types
from numba.core.extending import overload

__all__ = []


@overload(math.fmod, target="cpu")
def _fmod(x, y):
    if isinstance(x, (types.Float, types.Integer)) and isinstance(y, (types.Float, types.Integer)):
        return lambda x, y: np.fmod(x, y)


# IEEE remainder: the C library's own (numba's CPU target has no math.remainder; CUDA
# lowers it to libdevice's __nv_remainder / __nv_remainderf)
_C_REMAINDER = types.ExternalFunction("remainder", types.float64(types.float64, types.float64))
_C_REMAINDERF = types.ExternalFunction("remainderf",
                                       types.float32(types.float32, types.float32))


@overload(math.remainder, target="cpu")
def _remainder(x, y):
    if not all(isinstance(t, (types.Float, types.Integer)) for t in (x, y)):
        return None
    if x == types.float32 and y == types.float32:
        return lambda x, y: _C_REMAINDERF(x, y)
    return lambda x, y: _C_REMAINDER(np.float64(x), np.float64(y))


@overload(math.modf, target="cpu")
def _modf(x):
    if not isinstance(x, (types.Float, types.Integer)):
        return None
    ftype = np.float32 if x == types.float32 else np.float64

    def impl(x):
        v = ftype(x)
        if math.isinf(v):  # C's modf: (+-0, +-inf)
            return math.copysign(ftype(0.0), v), v
        whole = np.trunc(v)
        return math.copysign(v - whole, v), whole  # -2.0 -> (-0.0, -2.0), as in C

    return impl
