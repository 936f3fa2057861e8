"""Barriers in branches whose condition is the same for every thread of a block (issue 44).

A ``cuda.syncthreads()`` under a condition built only from kernel arguments, block indices,
block sizes and constants is reached by all threads of a block or by none: CUDA allows it, the
simulator runs it, and so must the cpu backend, with derivatives that match central differences.
A barrier under a condition on ``threadIdx`` or on per-thread data, which only part of a block
reaches, stays refused on the cpu backend with the line and the block.
"""
import os

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda
from dualgpu.errors import DualgpuError

BACKENDS = ["cpu", "cudasim"]
THREADS = 16


@cuda.jit
def _argument_branch(u, out, alpha, use_tile, n):
    """The barrier under a kernel argument and a value derived from one (a dual alpha)."""
    tile = cuda.shared.array(64, dtype=np.float64)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    x = 0.0
    if i < n:
        x = u[i]
    smooth = use_tile == 1 and alpha > 0.0
    if smooth:
        tile[t] = alpha * x
        cuda.syncthreads()
        x = x + tile[(t + 1) % cuda.blockDim.x] * x
    if i < n:
        out[i] = x


@cuda.jit
def _block_branch(u, out, half):
    """The barrier under block indices and sizes: uniform inside each block, not across them."""
    tile = cuda.shared.array(64, dtype=np.float64)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    x = u[i]
    if cuda.blockIdx.x * cuda.blockDim.x < half and cuda.blockDim.x == 16:
        tile[t] = x * x
        cuda.syncthreads()
        x = x * tile[THREADS - 1 - t]
    out[i] = x


@cuda.jit
def _loop_branch(u, out, steps):
    """Barriers under a branch on a loop counter whose range is a kernel argument."""
    tile = cuda.shared.array(64, dtype=np.float64)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    x = u[i]
    for s in range(steps):
        if s % 2 == 0:
            tile[t] = x
            cuda.syncthreads()
            x = 0.5 * (x + tile[(t + 1) % THREADS] ** 2)
            cuda.syncthreads()
    out[i] = x


def _run(kernel, u, *args, blocks=2):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    kernel[blocks, THREADS](d, out, *args)
    return out.copy_to_host()


CASES = {
    "argument": (_argument_branch, lambda u, a: _run(_argument_branch, u, a, 1, u.shape[0]),
                 28),
    "block": (_block_branch, lambda u, a: a * _run(_block_branch, u, 16), 32),
    "loop": (_loop_branch, lambda u, a: a * _run(_loop_branch, u, 3), 32),
}


#: every case in float64 on every backend; float32 on the simulator for every case and on the
#: cpu backend for one (a compile each); DUALGPU_TEST_CASES=all runs the whole product
FULL_PRODUCT = os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all"


@pytest.mark.parametrize("backend, dtype, case", [
    pytest.param(backend, dtype, case, id=f"{case}-{dtype.__name__}-{backend}")
    for backend in BACKENDS for dtype in (np.float32, np.float64)
    for case in sorted(CASES)
    if FULL_PRODUCT or not (backend == "cpu" and dtype == np.float32 and case != "block")])
def test_uniform_barrier_runs_and_differentiates(backend, dtype, case):
    _, simulate, n = CASES[case]
    u = np.linspace(0.2, 0.9, n).astype(dtype)
    alpha = dtype(0.7)
    with dualgpu.using_backend(backend):
        jac = np.asarray(dualgpu.jacobian(simulate, u, alpha, argnums=(0, 1))[0], np.float64)
        h = 1e-6 if dtype == np.float64 else 1e-2
        fd = np.empty((n, n))
        for k in range(n):
            e = np.zeros(n)
            e[k] = h
            fd[:, k] = (simulate(u.astype(np.float64) + e, 0.7)
                        - simulate(u.astype(np.float64) - e, 0.7)) / (2 * h)
    assert np.abs(fd).max() > 0.1  # the barrier's neighbour terms are in the derivative
    tol = 1e-7 if dtype == np.float64 else 3e-3
    np.testing.assert_allclose(jac.reshape(n, n), fd, rtol=tol, atol=tol * np.abs(fd).max())


@cuda.jit
def _thread_branch(u, out):
    tile = cuda.shared.array(64, dtype=np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t < 8:
        tile[t] = u[i]
        cuda.syncthreads()
        out[i] = tile[7 - t]


@cuda.jit
def _data_branch(u, out):
    tile = cuda.shared.array(64, dtype=np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if u[i] > 0.5:
        tile[t] = u[i]
        cuda.syncthreads()
        out[i] = tile[t]


@pytest.mark.parametrize("kernel", [_thread_branch, _data_branch])
def test_divergent_barrier_stays_refused_on_cpu(kernel):
    u = (np.arange(32) % 3) / 2.0  # some threads of each block above 0.5, some not
    with dualgpu.using_backend("cpu"):
        with pytest.raises(DualgpuError, match=r"cuda.syncthreads\(\) at line \d+ of kernel .* "
                                               r"was reached by \d+ of the 16 threads"):
            kernel[2, THREADS](u, np.zeros(32))
