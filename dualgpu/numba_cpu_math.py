"""``math`` functions that numba.cuda compiles but numba's CPU target lacks.

The cpu backend runs CUDA kernels with ``@njit``; a kernel that calls
``math.fmod`` compiles for the GPU, so it must compile on the CPU too. These
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
