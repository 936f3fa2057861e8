"""Real codes of round 4 (issue 25): host buffers, as numba.cuda users write them.

Each is written against numba.cuda and ported by the import line only (``from dualgpu
import cuda``): host numpy arrays handed to kernels (numba copies them in and out), a
multi-field state in one 2-D host buffer, a reduction into a host array, copy_to_host into
a preallocated host buffer, host stores of parameters into a numpy buffer, and a kernel
factory. ``*_edited`` variants carry the one-line edit a code still needs after issue 25.
"""
import math

import numpy as np

import dualgpu
from dualgpu import cuda

TPB = 8


def _blocks(n):
    return (n + TPB - 1) // TPB


# -- 1. heat equation on host arrays, launched directly, buffers swapped -----------------
@cuda.jit
def heat_step(u, u_new, r):
    i = cuda.grid(1)
    n = u.shape[0]
    if i < n:
        left = u[i - 1] if i > 0 else u[i]
        right = u[i + 1] if i < n - 1 else u[i]
        u_new[i] = u[i] + r * (left - 2.0 * u[i] + right)


def heat_host(r, amp, n=8, steps=4):
    x = np.linspace(0.0, 1.0, n)
    u = np.zeros(n)
    u[:] = np.sin(np.pi * x)
    u_new = np.zeros(n)
    for _ in range(steps):
        heat_step[_blocks(n), TPB](u, u_new, r)
        u, u_new = u_new, u
    return u * amp  # a host array times a parameter


# -- 2. multi-field state in one 2-D host buffer -------------------------------------------
@cuda.jit
def init_fields(state, k, v0):
    i = cuda.grid(1)
    if i < state.shape[1]:
        state[1, i] = v0 * math.cos(0.5 * i)
        state[2, i] = k


@cuda.jit
def oscillator_step(state, dt):
    i = cuda.grid(1)
    if i < state.shape[1]:
        x = state[0, i]
        v = state[1, i]
        k = state[2, i]
        v = v - dt * k * x
        state[0, i] = x + dt * v
        state[1, i] = v


def oscillators(k, v0, n=6, steps=5):
    state = np.zeros((3, n))
    state[0] = np.linspace(-1.0, 1.0, n)
    init_fields[_blocks(n), TPB](state, k, v0)
    for _ in range(steps):
        oscillator_step[_blocks(n), TPB](state, 0.1)
    return state[:2]  # positions and velocities: a view of the buffer


# -- 3. a reduction into a host array ----------------------------------------------------------
@cuda.jit
def decay(u, rate, dt):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] * math.exp(-rate * dt)


@cuda.jit
def energy_sum(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        cuda.atomic.add(out, 0, 0.5 * u[i] * u[i])


def energy_host(rate, n=8, steps=3):
    d_u = cuda.to_device(np.linspace(0.5, 1.5, n))
    energy = np.zeros(1)
    for _ in range(steps):
        decay[_blocks(n), TPB](d_u, rate, 0.1)
    energy_sum[_blocks(n), TPB](d_u, energy)
    return energy


def energy_scalar(rate, n=8, steps=3):
    """As energy_host, returning ``energy[0]``: a numpy read, refused under the driver."""
    d_u = cuda.to_device(np.linspace(0.5, 1.5, n))
    energy = np.zeros(1)
    for _ in range(steps):
        decay[_blocks(n), TPB](d_u, rate, 0.1)
    energy_sum[_blocks(n), TPB](d_u, energy)
    return energy[0]


def energy_scalar_edited(rate, n=8, steps=3):
    """The edit: return the slice ``energy[0:1]`` (a view), not the number ``energy[0]``."""
    d_u = cuda.to_device(np.linspace(0.5, 1.5, n))
    energy = np.zeros(1)
    for _ in range(steps):
        decay[_blocks(n), TPB](d_u, rate, 0.1)
    energy_sum[_blocks(n), TPB](d_u, energy)
    return energy[0:1]


# -- 4. device arrays, copy_to_host into a preallocated host buffer --------------------------
@cuda.jit
def logistic_step(u, growth, dt):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] + dt * growth * u[i] * (1.0 - u[i])


def logistic_snapshots(growth, n=6, steps=4):
    d_u = cuda.to_device(np.linspace(0.1, 0.6, n))
    history = np.zeros((steps, n))
    for s in range(steps):
        logistic_step[_blocks(n), TPB](d_u, growth, 0.5)
        d_u.copy_to_host(history[s])
    return history


# -- 5. parameters stored into a host numpy buffer, then copied to the device ---------------
@cuda.jit
def damped(u, params):
    i = cuda.grid(1)
    if i < u.shape[0]:
        u[i] = u[i] * (1.0 - params[0]) + params[1]


def params_buffer(c, f, n=6, steps=3):
    params = np.zeros(2)
    params[0] = c
    params[1] = f
    d_params = cuda.to_device(params)
    d_u = cuda.to_device(np.linspace(1.0, 2.0, n))
    for _ in range(steps):
        damped[_blocks(n), TPB](d_u, d_params)
    return d_u.copy_to_host()


def params_buffer_edited(c, f, n=6, steps=3):
    """The edit: ``params = dualgpu.zeros(2)`` (a DualArray under the driver)."""
    params = dualgpu.zeros(2)
    params[0] = c
    params[1] = f
    d_params = cuda.to_device(params)
    d_u = cuda.to_device(np.linspace(1.0, 2.0, n))
    for _ in range(steps):
        damped[_blocks(n), TPB](d_u, d_params)
    return d_u.copy_to_host()


# -- 6. a kernel factory over a parameter (a Hodgkin-Huxley-like gate) ------------------------
def make_gate(tau):
    @cuda.jit
    def relax(m, m_inf, dt):
        i = cuda.grid(1)
        if i < m.shape[0]:
            m[i] = m[i] + dt * (m_inf[i] - m[i]) / tau

    return relax


def gate(tau, n=6, steps=4):
    relax = make_gate(tau)
    d_m = cuda.to_device(np.zeros(n))
    d_inf = cuda.to_device(np.linspace(0.2, 0.9, n))
    for _ in range(steps):
        relax[_blocks(n), TPB](d_m, d_inf, 0.1)
    return d_m.copy_to_host()


#: name: (simulation ported by the import line only, parameters, the edited version or None)
CODES = {
    "heat_host": (heat_host, (0.2, 1.5), None),
    "oscillators": (oscillators, (2.0, 0.3), None),
    "energy_host": (energy_host, (0.7,), None),
    "energy_scalar": (energy_scalar, (0.7,), energy_scalar_edited),
    "logistic_snapshots": (logistic_snapshots, (1.3,), None),
    "params_buffer": (params_buffer, (0.2, 0.1), params_buffer_edited),
    "gate_factory": (gate, (0.4,), None),
}
