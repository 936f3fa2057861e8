"""The example simulations written by hand with ``@njit(parallel=True)``, and the N-body
tangent loop a numba expert would write: the references of :mod:`benchmarks.cases_simd`.

Each ``*_njit`` function runs the same steps as the simulation's ``simulate`` (one
``prange`` loop per kernel launch, the same arithmetic in the same order), so a plain
run through the cpu backend can be compared with it side by side, and its result
checked bit for bit.

:func:`nbody_mass_tangents` is the hand-written forward sensitivity of the N-body
accelerations: per pair it computes the scalar coefficients once, then runs a stride-1
loop over the lanes of tangents laid out ``(body, component, lane)``, ``prange`` over
bodies; 25 floating-point operations per pair and lane.
"""
import math

import numpy as np
from numba import njit, prange

__all__ = ["heat1d_njit", "gray_scott_njit", "pendulums_njit", "nbody_njit",
           "nbody_mass_tangents", "nbody_tangent_loop", "PAIR_LANE_FLOPS"]

#: Floating-point operations of the dual N-body pair loop per pair and lane.
PAIR_LANE_FLOPS = 25


@njit(parallel=True)
def _heat1d_steps(u, u_new, r, left, right, n_steps):
    n = u.shape[0]
    for _ in range(n_steps):
        for i in prange(n):
            if i == 0:
                u_new[i] = left
            elif i == n - 1:
                u_new[i] = right
            else:
                u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u, u_new = u_new, u
    return u


def heat1d_njit(u0, n_steps, alpha=1.0, dt=4.0e-5, dx=0.01, left=0.0, right=0.0):
    """:func:`simulations.heat1d.simulate` (Dirichlet ends) by hand."""
    return _heat1d_steps(u0.copy(), np.empty_like(u0), alpha * dt / dx ** 2, left, right,
                         n_steps).copy()


@njit(parallel=True)
def _gray_scott_steps(u, v, u_new, v_new, ru, rv, F, k, dt, n_steps):
    nx, ny = u.shape
    for _ in range(n_steps):
        for i in prange(nx):
            for j in range(ny):
                im = (i - 1) % nx  # per cell, as the kernel computes them
                ip = (i + 1) % nx
                jm = (j - 1) % ny
                jp = (j + 1) % ny
                uc = u[i, j]
                vc = v[i, j]
                lap_u = u[im, j] + u[ip, j] + u[i, jm] + u[i, jp] - 4.0 * uc
                lap_v = v[im, j] + v[ip, j] + v[i, jm] + v[i, jp] - 4.0 * vc
                uvv = uc * vc * vc
                u_new[i, j] = uc + ru * lap_u + dt * (F * (1.0 - uc) - uvv)
                v_new[i, j] = vc + rv * lap_v + dt * (uvv - (F + k) * vc)
        u, u_new = u_new, u
        v, v_new = v_new, v
    return u, v


def gray_scott_njit(u0, v0, n_steps, F=0.035, k=0.065, Du=0.16, Dv=0.08, dt=1.0, dx=1.0):
    """:func:`simulations.gray_scott.simulate` by hand."""
    u, v = _gray_scott_steps(u0.copy(), v0.copy(), np.empty_like(u0), np.empty_like(v0),
                             Du * dt / dx ** 2, Dv * dt / dx ** 2, F, k, dt, n_steps)
    return u.copy(), v.copy()


@njit(inline="always")
def _angular_acceleration(theta, omega, t, damping, amplitude, frequency, g_over_l):
    return (-g_over_l * math.sin(theta) - damping * omega
            + amplitude * math.cos(frequency * t))


@njit(parallel=True)
def _pendulum_steps(theta, omega, t0, dt, damping, amplitude, frequency, g_over_l, n_steps):
    for step in range(n_steps):
        t = t0 + step * dt
        for i in prange(theta.shape[0]):
            th = theta[i]
            om = omega[i]
            half = 0.5 * dt
            k1t = om
            k1o = _angular_acceleration(th, om, t, damping, amplitude, frequency, g_over_l)
            k2t = om + half * k1o
            k2o = _angular_acceleration(th + half * k1t, om + half * k1o, t + half, damping,
                                        amplitude, frequency, g_over_l)
            k3t = om + half * k2o
            k3o = _angular_acceleration(th + half * k2t, om + half * k2o, t + half, damping,
                                        amplitude, frequency, g_over_l)
            k4t = om + dt * k3o
            k4o = _angular_acceleration(th + dt * k3t, om + dt * k3o, t + dt, damping,
                                        amplitude, frequency, g_over_l)
            sixth = dt / 6.0
            theta[i] = th + sixth * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
            omega[i] = om + sixth * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)


def pendulums_njit(theta0, omega0, n_steps, dt=0.01, damping=0.5, drive_amplitude=1.2,
                   drive_frequency=2.0 / 3.0, g_over_l=1.0, t0=0.0):
    """:func:`simulations.pendulums.simulate` by hand."""
    theta, omega = theta0.copy(), omega0.copy()
    _pendulum_steps(theta, omega, t0, dt, damping, drive_amplitude, drive_frequency, g_over_l,
                    n_steps)
    return theta, omega


@njit(parallel=True)
def _nbody_accelerations(pos, mass, g, eps, acc):
    n = pos.shape[0]
    eps2 = eps * eps
    for i in prange(n):
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = ay = az = 0.0
        for j in range(n):
            if j != i:
                dx = pos[j, 0] - xi
                dy = pos[j, 1] - yi
                dz = pos[j, 2] - zi
                r2 = dx * dx + dy * dy + dz * dz + eps2
                s = g * mass[j] / (r2 * math.sqrt(r2))
                ax += s * dx
                ay += s * dy
                az += s * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@njit(parallel=True)
def _nbody_kick_drift(pos, vel, acc, dt):
    for i in prange(pos.shape[0]):
        for d in range(3):
            vel[i, d] = vel[i, d] + 0.5 * dt * acc[i, d]
            pos[i, d] = pos[i, d] + dt * vel[i, d]


@njit(parallel=True)
def _nbody_kick(vel, acc, dt):
    for i in prange(vel.shape[0]):
        for d in range(3):
            vel[i, d] = vel[i, d] + 0.5 * dt * acc[i, d]


def nbody_njit(positions, velocities, masses, n_steps, G=1.0, eps=0.05, dt=1.0e-3):
    """:func:`simulations.nbody.simulate` by hand (kick-drift-kick, same order)."""
    pos, vel = positions.copy(), velocities.copy()
    acc = np.empty_like(pos)
    _nbody_accelerations(pos, masses, G, eps, acc)
    for _ in range(n_steps):
        _nbody_kick_drift(pos, vel, acc, dt)
        _nbody_accelerations(pos, masses, G, eps, acc)
        _nbody_kick(vel, acc, dt)
    return pos, vel


@njit(parallel=True, fastmath={"contract"})
def nbody_mass_tangents(pos, dpos, mass, dmass, g, eps, acc, dacc):
    """Accelerations and their tangents: ``dpos (n, 3, L)``, ``dmass (n, L)``,
    ``dacc (n, 3, L)``."""
    n, lanes = pos.shape[0], dmass.shape[1]
    eps2 = eps * eps
    for i in prange(n):
        xi, yi, zi = pos[i, 0], pos[i, 1], pos[i, 2]
        ax = ay = az = 0.0
        tx = np.zeros(lanes)
        ty = np.zeros(lanes)
        tz = np.zeros(lanes)
        for j in range(n):
            if j == i:
                continue
            dx = pos[j, 0] - xi
            dy = pos[j, 1] - yi
            dz = pos[j, 2] - zi
            r2 = dx * dx + dy * dy + dz * dz + eps2
            r3 = r2 * math.sqrt(r2)
            s = g * mass[j] / r3
            c_m = g / r3            # ds/dm_j
            c_r = -1.5 * s / r2     # ds/dr2
            ax += s * dx
            ay += s * dy
            az += s * dz
            for k in range(lanes):
                ddx = dpos[j, 0, k] - dpos[i, 0, k]
                ddy = dpos[j, 1, k] - dpos[i, 1, k]
                ddz = dpos[j, 2, k] - dpos[i, 2, k]
                ds = c_m * dmass[j, k] + c_r * 2.0 * (dx * ddx + dy * ddy + dz * ddz)
                tx[k] += ds * dx + s * ddx
                ty[k] += ds * dy + s * ddy
                tz[k] += ds * dz + s * ddz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az
        for k in range(lanes):
            dacc[i, 0, k] = tx[k]
            dacc[i, 1, k] = ty[k]
            dacc[i, 2, k] = tz[k]


def nbody_tangent_loop(parallel):
    """The hand-written N-body tangent loop of ``shared/reference/nbody_tangent_loop.py``
    (unchanged: scalar chain-rule coefficients once per pair, then a stride-1 lane loop),
    compiled with ``@njit(parallel=parallel)``.

    Returns ``acc_tangent(pos, m, dpos, dm, g, eps2, acc, dacc)``, ``dpos`` and ``dm``
    lanes-last (``(n, 3, L)`` and ``(n, L)``); it writes ``acc`` and ``dacc``.
    """
    @njit(parallel=parallel)
    def acc_tangent(pos, m, dpos, dm, g, eps2, acc, dacc):
        n = pos.shape[0]
        L = dpos.shape[2]
        for i in prange(n):
            ax = 0.0
            ay = 0.0
            az = 0.0
            tx = np.zeros(L)
            ty = np.zeros(L)
            tz = np.zeros(L)
            xi = pos[i, 0]
            yi = pos[i, 1]
            zi = pos[i, 2]
            for j in range(n):
                if j == i:
                    continue
                dx = pos[j, 0] - xi
                dy = pos[j, 1] - yi
                dz = pos[j, 2] - zi
                r2 = dx * dx + dy * dy + dz * dz + eps2
                inv = 1.0 / (r2 * np.sqrt(r2))
                s = g * m[j] * inv
                ax += s * dx
                ay += s * dy
                az += s * dz
                c = -3.0 * s / r2
                gi = g * inv
                for l in range(L):
                    ddx = dpos[j, 0, l] - dpos[i, 0, l]
                    ddy = dpos[j, 1, l] - dpos[i, 1, l]
                    ddz = dpos[j, 2, l] - dpos[i, 2, l]
                    ds = c * (dx * ddx + dy * ddy + dz * ddz) + gi * dm[j, l]
                    tx[l] += ds * dx + s * ddx
                    ty[l] += ds * dy + s * ddy
                    tz[l] += ds * dz + s * ddz
            acc[i, 0] = ax
            acc[i, 1] = ay
            acc[i, 2] = az
            for l in range(L):
                dacc[i, 0, l] = tx[l]
                dacc[i, 1, l] = ty[l]
                dacc[i, 2, l] = tz[l]
    return acc_tangent
