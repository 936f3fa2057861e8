"""Ordinary numba.cuda kernels ported to dualgpu with the one line ``from dualgpu import cuda``.

They are written the way simulation authors write them: boundary branches, inner
loops over neighbours, device functions from another module
(:mod:`kernels_device_lib`), grid-stride loops, float32, local scratch arrays and
early returns. ``tests/test_porting.py`` runs each of them plain and dual on every
backend and compares with the original kernel (its ``py_func`` run by numba's
simulator).
"""
import math

from dualgpu import cuda
from numba import float64

from kernels_device_lib import laplacian_1d, pair_force, weighted_sum3

__all__ = [
    "stencil_1d", "stencil_2d", "nbody_accel", "smooth_with_lib", "grid_stride_scale",
    "stencil_1d_f32", "local_scratch", "early_return",
]


@cuda.jit
def stencil_1d(u, out, alpha, left, right):
    """Explicit heat step with Dirichlet values at both ends."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if i == 0:
        out[i] = left
    elif i == n - 1:
        out[i] = right
    else:
        out[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@cuda.jit
def stencil_2d(u, out, alpha, edge):
    """2-D five-point step; the border gets ``edge * u`` and a sine source inside."""
    i, j = cuda.grid(2)
    nx, ny = u.shape
    if i < nx and j < ny:
        if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
            out[i, j] = edge * u[i, j]
        else:
            lap = u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
            out[i, j] = u[i, j] + alpha * lap + 0.01 * math.sin(u[i, j])


@cuda.jit
def nbody_accel(pos, mass, soft, acc):
    """All-pairs softened gravity: an inner loop over every other particle."""
    i = cuda.grid(1)
    if i < pos.shape[0]:
        ax = 0.0
        ay = 0.0
        for j in range(pos.shape[0]):
            if j != i:
                fx, fy = pair_force(pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1], mass[j], soft)
                ax += fx
                ay += fy
        acc[i, 0] = ax
        acc[i, 1] = ay


@cuda.jit
def smooth_with_lib(u, out, w, dt):
    """Calls device functions from another module, one with a float accumulator."""
    i = cuda.grid(1)
    if 0 < i < u.shape[0] - 1:
        out[i] = weighted_sum3(u, i, w) + dt * laplacian_1d(u, i)
    elif i < u.shape[0]:
        out[i] = u[i]


@cuda.jit
def fixed_ends(u, left, right):
    """Boundary values, one thread per end: launched with 2 threads on purpose."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i == 0:
        u[0] = left
    elif i == 1:
        u[n - 1] = right


@cuda.jit
def grid_stride_scale(x, out, k):
    """A grid-stride loop: any launch size covers the array."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = k * math.exp(-x[i] * x[i]) + math.tanh(k * x[i])


@cuda.jit
def stencil_1d_f32(u, out, alpha):
    """A float32 kernel (periodic boundaries)."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        left = u[(i - 1) % n]
        right = u[(i + 1) % n]
        out[i] = u[i] + alpha * (left - 2.0 * u[i] + right)


@cuda.jit
def local_scratch(x, out, c):
    """Scratch in ``cuda.local.array``: three powers of c*x, then their weighted sum."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        tmp = cuda.local.array(3, float64)
        tmp[0] = c * x[i]
        for k in range(1, 3):
            tmp[k] = tmp[k - 1] * c * x[i]
        s = 0.0
        for k in range(3):
            s += tmp[k] / (k + 1)
        out[i] = s


@cuda.jit
def early_return(x, out, threshold):
    """Threads whose value is below the threshold leave early (out keeps its content)."""
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    if x[i] < threshold:
        return
    out[i] = math.sqrt(x[i] - threshold) * threshold
