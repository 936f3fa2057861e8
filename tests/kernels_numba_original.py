"""Kernels decorated with numba.cuda itself (a library the user cannot edit)."""
import math

from numba import cuda


@cuda.jit(device=True)
def smooth(x):
    return math.tanh(x) * x


@cuda.jit
def apply_smooth(u, out, scale):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = scale * smooth(u[i])


@cuda.jit(fastmath=False)  # (an eager signature would need a GPU to compile)
def doubled(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = 2.0 * u[i] + cuda.threadIdx.x * 0.0
