"""Kernels that make lane tiles hard: in-place updates, reads of what they write, atomics,
scratch arrays, device functions, several kernels per step. Written as numba.cuda users do.
"""
import math

from numba import cuda, float64


@cuda.jit(device=True)
def scaled_sum(a, b, s):
    return a + s * b


@cuda.jit(device=True)
def bump(x, i, amount):
    # a device function that writes into an array it is given
    x[i] = x[i] + amount


@cuda.jit
def axpy_in_place(x, v, dt):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] += dt * v[i]


@cuda.jit
def prefix_sum(x, out):
    # each thread reads what the previous thread wrote: serial order on the cpu backend
    i = cuda.grid(1)
    if i < x.shape[0]:
        if i == 0:
            out[i] = x[i]
        else:
            out[i] = out[i - 1] * 0.5 + x[i]


@cuda.jit
def count_and_scale(x, out, counter):
    # atomics on a plain int array, whose old value feeds the result
    i = cuda.grid(1)
    if i < x.shape[0]:
        old = cuda.atomic.add(counter, 0, 1)
        out[i] = x[i] * (1.0 + 0.001 * old)


@cuda.jit
def accumulate(x, acc):
    # a dual accumulated with atomics into one cell
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(acc, 0, x[i] * x[i])


@cuda.jit
def smooth_with_scratch(x, out):
    i = cuda.grid(1)
    n = x.shape[0]
    if i < n:
        w = cuda.local.array(3, dtype=float64)
        w[0] = x[(i - 1) % n]
        w[1] = x[i]
        w[2] = x[(i + 1) % n]
        out[i] = scaled_sum(w[1], w[0] + w[2], 0.25)


@cuda.jit
def bump_through_device(x, amounts):
    i = cuda.grid(1)
    if i < x.shape[0]:
        bump(x, i, math.sin(amounts[i]))


@cuda.jit
def rows_in_place(a, s):
    # a row view of a 2-D array written through a local name
    i = cuda.grid(1)
    if i < a.shape[0]:
        row = a[i]
        for j in range(a.shape[1]):
            row[j] = row[j] * s + j


@cuda.jit
def write_through_alias(src, dst):
    # with src and dst the same array this reads what it writes
    i = cuda.grid(1)
    if i < src.shape[0] - 1:
        dst[i] = 0.5 * (src[i] + src[i + 1])


@cuda.jit
def two_d_in_place(u, c):
    i, j = cuda.grid(2)
    if i < u.shape[0] and j < u.shape[1]:
        u[i, j] = u[i, j] * c + math.exp(-u[i, j])
