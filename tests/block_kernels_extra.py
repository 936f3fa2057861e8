"""More block-level kernels, ported with one line: the corners of shared memory, warps and casts.

Companions of ``block_kernels.py`` (which the cpu-backend work shares): two tiles of one
shape, tiles fresh in every block, dynamic shared memory of two dtypes side by side, warp
shuffles and votes of every kind, ``activemask`` in a branch, float casts, slice stores
into tiles, and kernels that are wrong on purpose (a barrier some threads never reach, a
shuffle that reads a lane that returned, a float16 tile of duals) for the error messages.
"""
import math

import numba
import numpy as np
from numba import float32, float64, int32
from numba.core.types import float16

from dualgpu import cuda  # was: from numba import cuda

TPB = 8
FULL = 0xFFFFFFFF


# --- shared memory --------------------------------------------------------------------------

@cuda.jit
def two_tiles(u, out):
    """Four tiles of one shape and dtype (two on one line): each must be its own memory."""
    a = cuda.shared.array(TPB, float64)
    b = cuda.shared.array(TPB, float64)
    c, d = cuda.shared.array(TPB, float64), cuda.shared.array(TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    x = u[i] if i < u.shape[0] else 0.0
    a[t] = x
    b[t] = 2.0 * x
    c[t] = x * x
    d[t] = -x
    cuda.syncthreads()
    if i < u.shape[0]:
        out[i] = a[(t + 1) % TPB] + b[t] + c[(t + 2) % TPB] * d[(t + 3) % TPB]


@cuda.jit
def first_read_of_tile(probe):
    """Thread 0 reads a tile cell before any thread of its block writes it, then writes it."""
    tile = cuda.shared.array(1, float64)
    if cuda.threadIdx.x == 0:
        probe[cuda.blockIdx.x] = tile[0]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        tile[0] = cuda.blockIdx.x + 1.0


@cuda.jit
def tile_slices(u, out, a):
    """Slice stores into a shared tile: a copy of a segment, a broadcast scalar, a dual."""
    tile = cuda.shared.array(12, float64)
    if cuda.threadIdx.x == 0:
        tile[0:4] = u[4:8]
        tile[4:8] = a * u[0]
        tile[8:] = 0.5
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < out.shape[0] and i < 12:
        out[i] = tile[i] * u[i]


@cuda.jit
def row_broadcast(u, out, a):
    """``out[i, :] = expression``: one row per thread."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i, :] = a * u[i]
        out[i, 0] = u[i] * u[i]


@cuda.jit
def dynamic_two_dtypes(u, out):
    """Dynamic shared memory holding float32 values then int32 flags, side by side."""
    values = cuda.shared.array(0, float32)
    flags = cuda.shared.array(0, int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = cuda.blockDim.x
    values[t] = u[i] if i < u.shape[0] else float32(0.0)
    flags[n + t] = 1 if i < u.shape[0] and u[i] > 0 else 0
    cuda.syncthreads()
    if i < u.shape[0]:
        left = values[t - 1] if t > 0 else values[t]
        out[i] = values[t] * float32(flags[n + t]) + left


@cuda.jit
def half_tile(u, out):
    """A float16 tile: it cannot hold a dual (its partials would be lost)."""
    tile = cuda.shared.array(TPB, float16)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < u.shape[0]:
        tile[t] = u[i]
    cuda.syncthreads()
    if i < u.shape[0]:
        out[i] = tile[t]


# --- warps ----------------------------------------------------------------------------------

@cuda.jit
def warp_shuffles(x, bcast, up, down, xor):
    """Every shuffle once: broadcast from lane 3, up by 1, down by 2, butterfly by 5."""
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    b = cuda.shfl_sync(FULL, v, 3)
    p = cuda.shfl_up_sync(FULL, v, 1)
    q = cuda.shfl_down_sync(FULL, v, 2)
    r = cuda.shfl_xor_sync(FULL, v, 5)
    if i < x.shape[0]:
        bcast[i] = b
        up[i] = p
        down[i] = q
        xor[i] = r


@cuda.jit
def warp_votes(x, out):
    """Votes of lanes on x > 0 and lane ids: all, any, eq, ballot, match, lanemask_lt."""
    i = cuda.grid(1)
    lane = cuda.laneid
    positive = x[i] > 0.0
    out[i, 0] = cuda.all_sync(FULL, positive)
    out[i, 1] = cuda.any_sync(FULL, positive)
    out[i, 2] = cuda.eq_sync(FULL, positive)
    out[i, 3] = cuda.ballot_sync(FULL, positive)
    out[i, 4] = cuda.match_any_sync(FULL, lane // 8)
    out[i, 5] = cuda.lanemask_lt()
    cuda.syncwarp(FULL)


@cuda.jit
def active_lanes(x, masks):
    """``activemask()`` inside a branch that only the even lanes take."""
    i = cuda.grid(1)
    masks[i] = 0
    if cuda.laneid % 2 == 0:
        m = cuda.activemask()
        s = cuda.shfl_down_sync(m, x[i], 2)
        masks[i] = m
        x[i] = s


@cuda.jit
def warp_norm(x, out, scale):
    """Per-warp sqrt(sum (scale x)^2) by xor-butterfly: every lane ends with the total."""
    i = cuda.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = scale * x[i]
        v = v * v
    mask = 16
    while mask > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, mask)
        mask //= 2
    if i < x.shape[0]:
        out[i] = math.sqrt(v)


def warp_norms(x, scale):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    warp_norm[(x.shape[0] + 31) // 32, 32](d_x, d_out, scale)
    return d_out.copy_to_host()


# --- kernels wrong on purpose ---------------------------------------------------------------

@cuda.jit
def shuffle_after_return(x, out):
    """Out-of-range threads return before a full-mask shuffle that reads them."""
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    out[i] = x[i] + cuda.shfl_down_sync(FULL, x[i], 1)


@cuda.jit
def barrier_in_branch(x, out):
    """Half the warp shuffles with a full mask while the other half waits at syncthreads."""
    i = cuda.grid(1)
    if cuda.laneid < 16:
        out[i] = cuda.shfl_sync(FULL, x[i], 0)
    else:
        cuda.syncthreads()
        out[i] = x[i]


@cuda.jit
def grid_sync_in_branch(x, out):
    """Only block 0 syncs the grid: the other blocks never arrive."""
    i = cuda.grid(1)
    g = cuda.cg.this_grid()
    if cuda.blockIdx.x == 0:
        g.sync()
    out[i] = x[i]


# --- float casts ----------------------------------------------------------------------------

@cuda.jit
def casts(u, out, a):
    """Casts as float32 codes write them: numba types, numpy types, cuda.float32, int32."""
    i = cuda.grid(1)
    if i < u.shape[0]:
        s = float32(u[i]) * np.float32(2.0) + numba.float32(a)
        t = cuda.float32(u[i]) * np.float64(a) + float64(s)
        k = int32(u[i] * 4.0)
        out[i] = t + k + np.float32(u[i] * u[i])


def simulate_casts(u, a):
    d_u = cuda.to_device(u)
    d_out = cuda.device_array_like(d_u)
    casts[(u.shape[0] + TPB - 1) // TPB, TPB](d_u, d_out, a)
    return d_out.copy_to_host()


# --- host side: copies into existing buffers ------------------------------------------------

@cuda.jit
def relax(u, u_new, w):
    i = cuda.grid(1)
    n = u.shape[0]
    if 0 < i < n - 1:
        u_new[i] = (1.0 - w) * u[i] + 0.5 * w * (u[i - 1] + u[i + 1])
    elif i < n:
        u_new[i] = u[i]


def relax_with_buffers(u0, w, n_steps=3):
    """Buffers allocated once and refilled: ``to_device(x, to=buf)`` and ``copy_to_device``."""
    n = u0.shape[0]
    d_u = cuda.device_array(n)
    d_new = cuda.device_array(n)
    cuda.to_device(u0, to=d_u)
    blocks = (n + TPB - 1) // TPB
    for _ in range(n_steps):
        relax[blocks, TPB](d_u, d_new, w)
        d_u.copy_to_device(d_new)
    return d_u.copy_to_host()


# --- kernel-side names imported from numba.cuda ------------------------------------------------

from numba.cuda import shfl_down_sync, syncthreads  # noqa: E402  (numba.cuda types these)


@cuda.jit
def imported_names(x, out, masks):
    """A barrier and a shuffle by imported names; two activemask call sites in two branches."""
    tile = cuda.shared.array(32, float64)
    t = cuda.threadIdx.x
    tile[t] = x[t]
    syncthreads()
    v = tile[31 - t] + shfl_down_sync(FULL, x[t], 1)
    if t < 16:
        masks[t] = cuda.activemask()
    else:
        masks[t] = cuda.activemask()
    out[t] = v
