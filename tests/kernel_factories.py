"""Kernel factories and module-global constants, as numba.cuda users write them (issue 25).

A kernel defined inside a function over a parameter bakes the parameter in by closure; a
module global read by a kernel does the same. Under the driver both hold a Dual, which the
compiled backends lift into a hidden argument (:mod:`dualgpu.porting.captured_duals`).
"""
import math

import numpy as np

from dualgpu import cuda


def decay_model(k):
    """A decay step whose rate ``k`` is a closure constant, also read by a device function."""

    @cuda.jit(device=True)
    def rate(x):
        return k * x

    @cuda.jit
    def step(u, out, dt):
        i = cuda.grid(1)
        if i < u.shape[0]:
            out[i] = u[i] - dt * rate(u[i]) + 0.1 * math.exp(-k * dt) * u[i]

    return step


def hh_model(g_na, g_k):
    """A Hodgkin-Huxley-like membrane step: conductances baked in by closure."""

    @cuda.jit(device=True)
    def gating(v, m):
        a = 0.1 * (v + 40.0) / (1.0 - math.exp(-(v + 40.0) / 10.0) + 1e-6)
        b = 4.0 * math.exp(-(v + 65.0) / 18.0)
        return a * (1.0 - m) - b * m

    @cuda.jit
    def step(v, m, dt, steps):
        i = cuda.grid(1)
        if i < v.shape[0]:
            vi = v[i]
            mi = m[i]
            for _ in range(steps):
                i_na = g_na * mi * mi * mi * (vi - 50.0)
                i_k = g_k * (vi + 77.0)
                vi = vi - dt * (i_na + i_k) * 0.01
                mi = mi + dt * gating(vi, mi)
            v[i] = vi
            m[i] = mi

    return step


RATE = 0.5  # a module-level constant read by global_decay (the driver may set a Dual here)


@cuda.jit(device=True)
def _scaled(x):
    return RATE * x


@cuda.jit
def global_decay(u, out, dt):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = u[i] - dt * _scaled(u[i])


def run_decay(k, dtype=np.float64, n=6):
    step = decay_model(k)
    u = cuda.to_device(np.linspace(0.2, 1.0, n).astype(dtype))
    out = cuda.device_array_like(u)
    step[1, 8](u, out, dtype(0.1))
    return out.copy_to_host()


def run_hh(g, dtype=np.float64, n=4):
    step = hh_model(g[0], g[1])
    v = cuda.to_device(np.linspace(-70.0, -55.0, n).astype(dtype))
    m = cuda.to_device(np.full(n, 0.05, dtype))
    step[1, 8](v, m, dtype(0.05), 20)
    return v.copy_to_host()


def run_global(k, dtype=np.float64, n=6):
    global RATE
    saved, RATE = RATE, k
    try:
        u = cuda.to_device(np.linspace(0.2, 1.0, n).astype(dtype))
        out = cuda.device_array_like(u)
        global_decay[1, 8](u, out, dtype(0.1))
        return out.copy_to_host()
    finally:
        RATE = saved


CAPTURED_ARRAY = None


@cuda.jit
def reads_global_array(out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = CAPTURED_ARRAY[i]
