"""Kernels and device functions for tests/test_backend_cpu.py, written as simulation code is.

They must live in a file: the CPU backend rewrites their source. Device functions
here are also called from kernels in the test module (device functions from
another module).
"""
import math
import sys
import types

import numba
import numba.cuda as cuda_module_alias
import numpy as np
from numba import cuda
from numba import cuda as nc
from numba.cuda import grid, threadIdx

#: A module-level constant and a module-level table, as simulations have them.
DIFFUSIVITY = 0.25
WEIGHTS = np.array([0.25, 0.5, 0.25])
SCRATCH_SHAPE = (2, 3)
GUARD_CAP = 70  # binds below n = 100 in the guard tests


# --- device functions --------------------------------------------------------
@cuda.jit(device=True)
def laplacian_1d(u, i):
    return u[i - 1] - 2.0 * u[i] + u[i + 1]


@cuda.jit(device=True)
def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


@cuda.jit(device=True)
def smoothed(u, i):
    # a device function calling another device function
    return u[i] + DIFFUSIVITY * laplacian_1d(u, i)


@cuda.jit(device=True)
def global_x():
    # a device function that reads the thread index itself
    return cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x


@cuda.jit(device=True)
def pair_force(dx, dy, softening):
    r2 = dx * dx + dy * dy + softening * softening
    inv_r3 = 1.0 / (r2 * math.sqrt(r2))
    return dx * inv_r3, dy * inv_r3


# --- kernels -----------------------------------------------------------------
@cuda.jit
def heat_1d(u, u_new, alpha):
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if i == 0 or i == n - 1:
        u_new[i] = u[i]
    else:
        u_new[i] = u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@cuda.jit
def heat_2d(u, u_new, alpha):
    i, j = cuda.grid(2)
    nx, ny = u.shape
    if i < nx and j < ny:
        if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
            u_new[i, j] = 0.0
        else:
            u_new[i, j] = u[i, j] + alpha * (
                u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j]
            )


@cuda.jit
def indices_3d(out, ids):
    x, y, z = cuda.grid(3)
    if x < out.shape[0] and y < out.shape[1] and z < out.shape[2]:
        out[x, y, z] = x + 100 * y + 10000 * z
        ids[x, y, z, 0] = cuda.threadIdx.x + 10 * cuda.threadIdx.y + 100 * cuda.threadIdx.z
        ids[x, y, z, 1] = cuda.blockIdx.x + 10 * cuda.blockIdx.y + 100 * cuda.blockIdx.z
        ids[x, y, z, 2] = cuda.blockDim.x + 10 * cuda.blockDim.y + 100 * cuda.blockDim.z
        ids[x, y, z, 3] = cuda.gridDim.x + 10 * cuda.gridDim.y + 100 * cuda.gridDim.z
        sx, sy, sz = cuda.gridsize(3)
        ids[x, y, z, 4] = sx + 100 * sy + 10000 * sz


@cuda.jit
def fill_3d(out, scale):
    x, y, z = cuda.grid(3)
    if x < out.shape[0] and y < out.shape[1] and z < out.shape[2]:
        out[x, y, z] = scale * (x + 100 * y + 10000 * z)


@cuda.jit
def transpose_columns(a, out):
    # x indexes the last (contiguous) axis, the GPU-coalesced way
    col, row = cuda.grid(2)
    if row < a.shape[0] and col < a.shape[1]:
        out[col, row] = a[row, col] + a[row, col]


@cuda.jit
def saxpy_grid_stride(a, x, y, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = a * x[i] + y[i]


@cuda.jit
def smooth_with_devices(u, out):
    i = cuda.grid(1)
    if 0 < i < u.shape[0] - 1:
        out[i] = clamp(smoothed(u, i), -1.0, 1.0)
    elif i < u.shape[0]:
        out[i] = u[i]


@cuda.jit
def nbody_accel(pos, acc, softening):
    i = cuda.grid(1)
    if i >= pos.shape[0]:
        return
    ax = 0.0
    ay = 0.0
    for j in range(pos.shape[0]):
        if j != i:
            fx, fy = pair_force(pos[j, 0] - pos[i, 0], pos[j, 1] - pos[i, 1], softening)
            ax += fx
            ay += fy
    acc[i, 0] = ax
    acc[i, 1] = ay


@cuda.jit
def moving_average_local(u, out):
    i = cuda.grid(1)
    if i < 1 or i >= u.shape[0] - 1:
        return
    window = cuda.local.array(3, numba.float64)
    counts = cuda.local.array(shape=(2,), dtype=numba.int32)
    counts[0] = 0
    for k in range(3):
        window[k] = WEIGHTS[k] * u[i - 1 + k]
        counts[0] += 1
    total = 0.0
    for k in range(counts[0]):
        total += window[k]
    out[i] = total


@cuda.jit
def outer_product_local(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        m = cuda.local.array(SCRATCH_SHAPE, dtype=np.float64)
        for r in range(SCRATCH_SHAPE[0]):
            for c in range(SCRATCH_SHAPE[1]):
                m[r, c] = x[i] * (r + 1) + c
        total = 0.0
        for r in range(m.shape[0]):
            for c in range(m.shape[1]):
                total += m[r, c]
        out[i] = total


def local_array_runtime_shape(x, n):
    scratch = cuda.local.array(n, numba.float64)
    scratch[0] = 1.0
    x[cuda.grid(1)] = scratch[0]


def allocates_with_numpy(x, out):
    # not valid numba.cuda, but valid numba: makes the backend recompile with NRT
    i = cuda.grid(1)
    if i < x.size:
        tmp = np.zeros(2)
        tmp[0] = x[i]
        out[i] = tmp[0] + tmp[1] + 1.0


@cuda.jit
def histogram(values, bins, lo, width, firsts):
    i = cuda.grid(1)
    if i < values.shape[0]:
        b = int((values[i] - lo) / width)
        b = min(max(b, 0), bins.shape[0] - 1)
        old = cuda.atomic.add(bins, b, 1)
        if old == 0:
            firsts[b] = i  # the thread that found the bin empty
        cuda.atomic.max(firsts, bins.shape[0], i)


@cuda.jit
def scale_float32(x, out, factor):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = numba.float32(factor) * x[i] + math.sin(x[i])


@cuda.jit
def lanes_and_warps(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, 0] = cuda.laneid
        out[i, 1] = cuda.warpsize


# Other spellings of "cuda".
def via_alias(out):
    i = cuda_module_alias.grid(1)
    if i < out.size:
        out[i] = nc.threadIdx.x + 1000 * numba.cuda.blockIdx.x


def via_names(out):
    i = grid(1)
    if i < out.size:
        out[i] = threadIdx.x


_drop_in = types.ModuleType("kernels_for_cpu_backend_drop_in")
_drop_in.__dualgpu_cuda__ = True
for _name in ("grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "local",
              "atomic"):
    setattr(_drop_in, _name, getattr(cuda, _name))
sys.modules[_drop_in.__name__] = _drop_in
dg_cuda = _drop_in


def via_drop_in(out):
    i = dg_cuda.grid(1)
    if i < out.size:
        out[i] = dg_cuda.threadIdx.x + 2 * i


def make_scaler(factor, offset):
    """A kernel factory: the kernel's free variables become constants."""

    @cuda.jit
    def scaler(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = factor * x[i] + offset + clamp(x[i], 0.0, 0.5)

    return scaler


@cuda.jit(device=True)
def double_it(v):
    return 2.0 * v


def calls_late_helper(x):
    # late_helper is assigned only after the kernel is compiled (see the tests)
    i = cuda.grid(1)
    if i < x.size:
        x[i] = late_helper(x[i])  # noqa: F821


# --- kernels the CPU backend must refuse ---------------------------------------
def uses_const(x, table):
    t = cuda.const.array_like(table)
    x[cuda.grid(1)] = t[0]


def uses_const_array(x):
    t = cuda.const.array((3,), numba.float64)
    x[cuda.grid(1)] = t[0]


def uses_nanosleep(x):
    cuda.nanosleep(100)
    x[cuda.grid(1)] = 1.0


@cuda.jit(device=True)
def device_uses_const_array(x):
    t = cuda.const.array((3,), numba.float64)
    x[0] = t[0]


def calls_device_with_const_array(x):
    device_uses_const_array(x)


# --- bounds guards: hoisted out of the launch loop, or deliberately not --------
@cuda.jit
def guard_lt_shape(u, out):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        out[i] = 2.0 * u[i] + (u[i - 1] if i > 0 else 0.0)


@cuda.jit
def guard_size_return(u, out):
    """A docstring first, then ``if i >= u.size: return``."""
    i = cuda.grid(1)
    if i >= u.size:
        return
    out[i] = u[i] + 1.0


@cuda.jit
def guard_len_flipped(u, out):
    i = cuda.grid(1)
    if len(u) > i:
        out[i] = u[i] * u[i]


@cuda.jit
def guard_scalar_param(u, out, n):
    i = cuda.grid(1)
    if not i < n:
        return
    out[i] = u[i] - 1.0


@cuda.jit
def guard_le_last(u, out):
    n = u.shape[0]
    i = cuda.grid(1)
    last = n - 1
    last = last - 1
    if i <= last:
        out[i] = u[i] + u[i + 1]


@cuda.jit
def guard_gt_return_global(u, out):
    i = cuda.grid(1)
    if i > min(u.shape[0], GUARD_CAP) - 1:
        return
    out[i] = -u[i]


# not hoistable: the bound is read from an array the kernel writes
@cuda.jit
def guard_from_written_array(out, limit):
    i = cuda.grid(1)
    n = limit[0]
    if i < n:
        out[i] = i
        limit[0] = n - 1


# not hoistable: the index is changed before the guard
@cuda.jit
def guard_index_reassigned(u, out):
    i = cuda.grid(1)
    i = i + 2
    if i < u.shape[0]:
        out[i] = u[i]


# not hoistable: statements after the guarded block run for every thread
@cuda.jit
def guard_then_more(u, out, flags):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = u[i]
    if i < flags.shape[0]:
        flags[i] = 1


# not hoistable: a device function call before the guard
@cuda.jit
def guard_after_device_call(u, out):
    i = cuda.grid(1)
    n = clamp(u.shape[0], 0, 5)
    if i < n:
        out[i] = u[i]
