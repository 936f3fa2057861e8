"""Device functions and kernels for the edge-case tests (issue 10), ported as users port them.

Each computation is a device function (run by ``@njit``, by the Python dual with ``math``
made dual-aware, and inside a kernel on the cpu and cudasim backends) and a thin kernel that
applies it to the first cells. They live in a file: the cpu backend rewrites kernel source.
"""
import math

import numpy as np

from dualgpu import cuda


@cuda.jit(device=True)
def remainders(x, y):
    return x % y, math.fmod(x, y)


@cuda.jit(device=True)
def selections(x, y):
    return min(x, y), max(x, y), np.minimum(x, y), np.maximum(x, y), np.floor_divide(x, y)


@cuda.jit(device=True)
def singular_points(x, y):
    """Factors that divide by zero at x = 0, y = 1 (the values do not raise in plain code)."""
    return (math.sqrt(x), math.log(x), math.atan2(x, x), math.fmod(y, x), math.asin(y),
            max(x, math.log(x)))


@cuda.jit
def remainders_kernel(x, y, out):
    if cuda.grid(1) == 0:
        out[0], out[1] = remainders(x[0], y[0])


@cuda.jit
def selections_kernel(x, y, out):
    if cuda.grid(1) == 0:
        out[0], out[1], out[2], out[3], out[4] = selections(x[0], y[0])


@cuda.jit
def singular_points_kernel(x, y, out):
    if cuda.grid(1) == 0:
        out[0], out[1], out[2], out[3], out[4], out[5] = singular_points(x[0], y[0])


@cuda.jit
def accumulate(u, out):
    """Reads ``out`` before writing it: ``out[i] += 2 u[i]``."""
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] += 2.0 * u[i]


@cuda.jit
def truncated(x, out):
    """``math.trunc`` of a dual (of its value) plus the dual."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.trunc(x[i]) + x[i]


@cuda.jit
def ratio(x, y, out):
    """``x / y``: with float32 x = 1e38, y = 0.5 the factor -x / y**2 overflows to -inf."""
    if cuda.grid(1) == 0:
        out[0] = x[0] / y[0]


@cuda.jit(device=True)
def promotions(d, f):
    """A float32 dual ``d`` combined with ``f`` in every way that promotes."""
    return (d + f, d * f, d / f, d - f, f - d, d ** f, min(d, f), max(f, d), math.atan2(d, f),
            math.hypot(d, f), math.pow(d, f), np.add(d, f), np.maximum(d, f))


#: what promotions_kernel computed (cudasim only: it appends Python objects)
RECORDED = []


@cuda.jit
def promotions_kernel(x, f):
    if cuda.grid(1) == 0:
        RECORDED.append(promotions(x[0], f))


@cuda.jit
def root_times(u, w, out):
    """``out[i] = sqrt(u[i]) * w[i]``."""
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = math.sqrt(u[i]) * w[i]


def root_times_simulation(u, w):
    """A simulation function around :func:`root_times` (host code as users write it)."""
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    root_times[(u.shape[0] + 31) // 32, 32](d_u, cuda.to_device(w), out)
    return out.copy_to_host()


@cuda.jit
def scaled(u, s, out):
    """``out[i] = s * u[i]`` for a scalar ``s``."""
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = s * u[i]


def scaled_simulation(u, s):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    scaled[(u.shape[0] + 31) // 32, 32](d_u, s, out)
    return out.copy_to_host()


@cuda.jit
def axpy(x, y, a):
    i = cuda.grid(1)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


def axpy_simulation(u, a):
    """A float32 state and a parameter of any dtype (a float64 dual under the driver)."""
    d_u = cuda.to_device(u)
    out = cuda.to_device(np.ones(u.shape, u.dtype))
    axpy[(u.shape[0] + 31) // 32, 32](d_u, out, a)
    return out.copy_to_host()
