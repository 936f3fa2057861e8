"""Kernels with scratch memory (shared tiles, dynamic shared memory, local arrays) written
as numba.cuda users write them, for sparsity detection (tests/test_detect_scratch.py)."""
import math

import numpy as np
from numba import float32, float64

from dualgpu import cuda  # was: from numba import cuda

TPB = 8


@cuda.jit
def smooth_shared(u, out):
    """Three-point stencil through a shared tile with a one-cell halo (periodic)."""
    tile = cuda.shared.array(TPB + 2, dtype=float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = u.shape[0]
    tile[t + 1] = u[i % n]
    if t == 0:
        tile[0] = u[(i - 1) % n]
    if t == TPB - 1:
        tile[TPB + 1] = u[(i + 1) % n]
    cuda.syncthreads()
    if i < n:
        out[i] = 0.25 * tile[t] + 0.5 * math.sin(tile[t + 1]) + 0.25 * tile[t + 2] ** 2


def smooth(u):
    d_u = cuda.to_device(u)
    d_out = cuda.device_array_like(d_u)
    smooth_shared[u.shape[0] // TPB, TPB](d_u, d_out)
    return d_out.copy_to_host()


@cuda.jit
def block_sums_dynamic(u, partial):
    """Each block's sum of u**2 by a tree reduction in dynamic shared memory."""
    s = cuda.shared.array(0, dtype=float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = u[i] * u[i] if i < u.shape[0] else 0.0
    cuda.syncthreads()
    half = cuda.blockDim.x // 2
    while half > 0:
        if t < half:
            s[t] += s[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = s[0]


def block_sums(u):
    blocks = (u.shape[0] + TPB - 1) // TPB
    d_partial = cuda.device_array(blocks, dtype=u.dtype)
    block_sums_dynamic[blocks, TPB, 0, TPB * u.dtype.itemsize](cuda.to_device(u), d_partial)
    return d_partial.copy_to_host()


@cuda.jit
def window_local(u, out):
    """Each cell: a weighted sum of its 3-cell window copied into local scratch."""
    w = cuda.local.array(3, dtype=float64)
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        for k in range(3):
            w[k] = u[(i + k - 1) % n]
        acc = 0.0
        for k in range(3):
            acc += (k + 1) * w[k] * w[k]
        out[i] = acc


@cuda.jit
def window_local_f32(u, out):
    """window_local in float32 scratch."""
    w = cuda.local.array(3, dtype=float32)
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        for k in range(3):
            w[k] = u[(i + k - 1) % n]
        out[i] = w[0] * w[2] + w[1]


def window(u):
    out = cuda.device_array_like(u)
    kernel = window_local_f32 if u.dtype == np.float32 else window_local
    kernel[(u.shape[0] + TPB - 1) // TPB, TPB](cuda.to_device(u), out)
    return out.copy_to_host()
