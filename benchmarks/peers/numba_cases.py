"""Hand-written numba peer: tangent (sensitivity) equations coded by hand, ``@njit(parallel=True)``.

What an expert writes without an AD tool: the simulation and its forward
sensitivities in one compiled loop, ``prange`` over independent members or
directions, float64. This is the bar for "no overhead": dualgpu's Jacobian of
the same simulation should not be slower.

pendulum
    RK4 of the pendulum together with its variational equations for the three
    parameters: with ``f = -sin(theta) - gamma omega + A cos(Omega t)``, each
    sensitivity ``(s, q) = d(theta, omega)/dp`` obeys ``s' = q``,
    ``q' = -cos(theta) s - gamma q + df/dp`` (``df/dgamma = -omega``,
    ``df/dA = cos(Omega t)``, ``df/dOmega = -A t sin(Omega t)``). RK4 applied to
    the augmented system is exactly forward-mode AD of the RK4 step.
heat
    The step is linear, so each tangent direction follows the same stencil;
    ``prange`` over directions (Jacobian) or one direction (JVP).

Every ``prepare_<case>(...)`` returns a zero-argument callable; its first call
compiles (numba's cache is off, so every process compiles once).
"""
import numpy as np
from numba import njit, prange

from ._cases import case_api

__all__ = [
    "AVAILABLE", "VERSION", "IMPORT_ERROR", "NAME", "CASES", "prepare",
    "heat_jacobian", "heat_jvp", "pendulum_param_jacobian",
    "prepare_heat_jacobian", "prepare_heat_jvp", "prepare_pendulum_param_jacobian",
]

import numba  # noqa: E402  (always present: dualgpu depends on it)

AVAILABLE = True
VERSION = numba.__version__
IMPORT_ERROR = None
NAME = "numba-hand"


# ---------------------------------------------------------------------------
# pendulum ensemble
# ---------------------------------------------------------------------------

@njit(inline="always")
def _rhs(t, th, om, gamma, amp, freq):
    """The pendulum's acceleration and its partials: (f, df/dtheta, df/domega, df/dp[3])."""
    phase = freq * t
    f = -np.sin(th) - gamma * om + amp * np.cos(phase)
    return f, -np.cos(th), -gamma, -om, np.cos(phase), -amp * t * np.sin(phase)


@njit(inline="always")
def _tangent_rhs(t, th, om, s0, s1, s2, q0, q1, q2, gamma, amp, freq):
    """(theta', omega', s'[0..2], q'[0..2]) of the augmented system, as 8 floats."""
    f, f_th, f_om, f_g, f_a, f_w = _rhs(t, th, om, gamma, amp, freq)
    return (om, f, q0, q1, q2,
            f_th * s0 + f_om * q0 + f_g, f_th * s1 + f_om * q1 + f_a, f_th * s2 + f_om * q2 + f_w)


@njit(parallel=True)
def _pendulum_jacobian(theta0, omega0, gamma, amp, freq, dt, steps, out):
    half = 0.5 * dt
    sixth = dt / 6.0
    for i in prange(theta0.shape[0]):
        th, om = theta0[i], omega0[i]
        s0 = s1 = s2 = q0 = q1 = q2 = 0.0
        for k in range(steps):
            t = k * dt
            a0, a1, a2, a3, a4, a5, a6, a7 = _tangent_rhs(
                t, th, om, s0, s1, s2, q0, q1, q2, gamma, amp, freq)
            b0, b1, b2, b3, b4, b5, b6, b7 = _tangent_rhs(
                t + half, th + half * a0, om + half * a1, s0 + half * a2, s1 + half * a3,
                s2 + half * a4, q0 + half * a5, q1 + half * a6, q2 + half * a7, gamma, amp, freq)
            c0, c1, c2, c3, c4, c5, c6, c7 = _tangent_rhs(
                t + half, th + half * b0, om + half * b1, s0 + half * b2, s1 + half * b3,
                s2 + half * b4, q0 + half * b5, q1 + half * b6, q2 + half * b7, gamma, amp, freq)
            d0, d1, d2, d3, d4, d5, d6, d7 = _tangent_rhs(
                t + dt, th + dt * c0, om + dt * c1, s0 + dt * c2, s1 + dt * c3,
                s2 + dt * c4, q0 + dt * c5, q1 + dt * c6, q2 + dt * c7, gamma, amp, freq)
            th = th + sixth * (a0 + 2.0 * b0 + 2.0 * c0 + d0)
            om = om + sixth * (a1 + 2.0 * b1 + 2.0 * c1 + d1)
            s0 = s0 + sixth * (a2 + 2.0 * b2 + 2.0 * c2 + d2)
            s1 = s1 + sixth * (a3 + 2.0 * b3 + 2.0 * c3 + d3)
            s2 = s2 + sixth * (a4 + 2.0 * b4 + 2.0 * c4 + d4)
            q0 = q0 + sixth * (a5 + 2.0 * b5 + 2.0 * c5 + d5)
            q1 = q1 + sixth * (a6 + 2.0 * b6 + 2.0 * c6 + d6)
            q2 = q2 + sixth * (a7 + 2.0 * b7 + 2.0 * c7 + d7)
        out[i, 0] = s0
        out[i, 1] = s1
        out[i, 2] = s2


def prepare_pendulum_param_jacobian(theta0, omega0, params, dt, steps):
    """Return a callable giving the (M, 3) Jacobian of final theta w.r.t. (gamma, A, omega)."""
    theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
    omega0 = np.ascontiguousarray(omega0, dtype=np.float64)
    gamma, amp, freq = (float(p) for p in params)

    def run():
        out = np.empty((theta0.shape[0], 3))
        _pendulum_jacobian(theta0, omega0, gamma, amp, freq, float(dt), int(steps), out)
        return out
    return run


# ---------------------------------------------------------------------------
# heat
# ---------------------------------------------------------------------------

@njit(parallel=True)
def _heat_tangents(tangents, r, steps):
    """Advance each row of ``tangents`` (directions x cells) by ``steps`` heat steps, in place."""
    m, n = tangents.shape
    for d in prange(m):
        u = tangents[d].copy()
        w = np.empty(n)
        for _ in range(steps):
            for i in range(n):
                left = u[i - 1] if i > 0 else 0.0
                right = u[i + 1] if i < n - 1 else 0.0
                w[i] = u[i] + r * (left - 2.0 * u[i] + right)
            u, w = w, u
        tangents[d] = u


def prepare_heat_jacobian(u0, r, steps):
    """Return a callable giving the (n, n) heat Jacobian: the identity's rows stepped."""
    n = np.shape(u0)[0]

    def run():
        rows = np.eye(n)
        _heat_tangents(rows, float(r), int(steps))
        return np.ascontiguousarray(rows.T)       # row d is column d of the Jacobian
    return run


def prepare_heat_jvp(u0, r, steps, v):
    """Return a callable giving J @ v (n,) for the heat problem."""
    v = np.asarray(v, dtype=np.float64)

    def run():
        rows = v.reshape(1, -1).copy()
        _heat_tangents(rows, float(r), int(steps))
        return rows[0]
    return run


#: case name -> prepare function; ``prepare(case, **problem)``; one-call functions per case
CASES, prepare, _ONE_CALL = case_api("numba_cases", globals())
heat_jacobian = _ONE_CALL["heat_jacobian"]
heat_jvp = _ONE_CALL["heat_jvp"]
pendulum_param_jacobian = _ONE_CALL["pendulum_param_jacobian"]
