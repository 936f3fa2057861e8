"""Damped driven pendulums with their own parameters: one thread per parameter sample.

The physics and the RK4 step are those of :mod:`simulations.pendulums`; here each member
(thread ``i``) reads its own six parameters from row ``i`` of a sample matrix ``X``, in the
order of :data:`PARAMETERS`:

====================  ========  =====================================================
column                unit      meaning
====================  ========  =====================================================
``damping``           1/s       linear friction rate
``drive_amplitude``   rad/s²    amplitude of the periodic driving acceleration
``drive_frequency``   rad/s     angular frequency of the drive
``g_over_l``          1/s²      gravity over pendulum length
``theta0``            rad       initial angle
``omega0``            rad/s     initial angular velocity
====================  ========  =====================================================

so that a whole global sensitivity design runs as one launch (an *ensemble* in the sense of
:func:`dualgpu.ensemble_jacobian`: member ``i``'s outputs depend only on row ``i``). The
kernel integrates ``n_steps`` RK4 steps of ``dt`` in a loop and stores the angle every
``every`` steps: the output is a time series per member, shape ``(n, n_steps // every)``.

:func:`simulate_numba` is the same model in plain numba (``@njit``, ``prange`` over
members), for reference timings of methods that need only values.
"""
import numba
import numpy as np
from dualgpu import cuda

from .pendulums import rk4_step

__all__ = ["PARAMETERS", "UNITS", "THREADS_PER_BLOCK", "integrate", "simulate",
           "simulate_numba"]

PARAMETERS = ("damping", "drive_amplitude", "drive_frequency", "g_over_l", "theta0", "omega0")
"""The columns of a sample matrix."""
UNITS = {"damping": "1/s", "drive_amplitude": "rad/s²", "drive_frequency": "rad/s",
         "g_over_l": "1/s²", "theta0": "rad", "omega0": "rad/s"}
"""Units of the parameters."""
THREADS_PER_BLOCK = 128
"""Threads per block of the 1-D launch."""


@cuda.jit
def integrate(X, n_steps, dt, every, out):
    """Member ``i``: ``n_steps`` RK4 steps from ``(X[i, 4], X[i, 5])``, the angle every
    ``every`` steps into ``out[i]``."""
    i = cuda.grid(1)
    if i >= X.shape[0]:
        return
    damping = X[i, 0]
    amplitude = X[i, 1]
    frequency = X[i, 2]
    g_over_l = X[i, 3]
    theta = X[i, 4]
    omega = X[i, 5]
    k = 0
    for step in range(n_steps):
        theta, omega = rk4_step(theta, omega, step * dt, dt, damping, amplitude, frequency,
                                g_over_l)
        if (step + 1) % every == 0:
            out[i, k] = theta
            k += 1


def _check(X, n_steps, every):
    if X.ndim != 2 or X.shape[1] != len(PARAMETERS):
        raise ValueError(f"X must have shape (n, {len(PARAMETERS)}) with columns {PARAMETERS}; "
                         f"got {X.shape}.")
    if n_steps < every or n_steps % every:
        raise ValueError(f"n_steps ({n_steps}) must be a positive multiple of every ({every}).")


def simulate(X, n_steps=500, dt=0.02, every=10, threads_per_block=THREADS_PER_BLOCK):
    """Return the angle of every member every ``every`` steps, shape ``(n, n_steps // every)``.

    Parameters
    ----------
    X : numpy.ndarray
        Shape ``(n, 6)``: one row of :data:`PARAMETERS` per member; never modified.
    n_steps : int
        RK4 steps.
    dt : float
        Time step [s].
    every : int
        Steps between stored angles.
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    numpy.ndarray
        ``theta[i, k]`` [rad] at ``t = (k + 1) * every * dt``.
    """
    _check(X, n_steps, every)
    n = X.shape[0]
    Xd = cuda.to_device(X)
    out = cuda.device_array((n, n_steps // every), dtype=X.dtype)
    blocks = (n + threads_per_block - 1) // threads_per_block
    integrate[blocks, threads_per_block](Xd, n_steps, dt, every, out)
    return out.copy_to_host()


@numba.njit(cache=False)
def _accel(theta, omega, t, damping, amplitude, frequency, g_over_l):
    return -g_over_l * np.sin(theta) - damping * omega + amplitude * np.cos(frequency * t)


@numba.njit(parallel=True, cache=False)
def _integrate_numba(X, n_steps, dt, every, out):
    for i in numba.prange(X.shape[0]):
        damping, amplitude, frequency, g_over_l = X[i, 0], X[i, 1], X[i, 2], X[i, 3]
        theta, omega = X[i, 4], X[i, 5]
        half = 0.5 * dt
        k = 0
        for step in range(n_steps):
            t = step * dt
            k1t = omega
            k1o = _accel(theta, omega, t, damping, amplitude, frequency, g_over_l)
            k2t = omega + half * k1o
            k2o = _accel(theta + half * k1t, omega + half * k1o, t + half, damping, amplitude,
                         frequency, g_over_l)
            k3t = omega + half * k2o
            k3o = _accel(theta + half * k2t, omega + half * k2o, t + half, damping, amplitude,
                         frequency, g_over_l)
            k4t = omega + dt * k3o
            k4o = _accel(theta + dt * k3t, omega + dt * k3o, t + dt, damping, amplitude,
                         frequency, g_over_l)
            sixth = dt / 6.0
            theta = theta + sixth * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
            omega = omega + sixth * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
            if (step + 1) % every == 0:
                out[i, k] = theta
                k += 1


def simulate_numba(X, n_steps=500, dt=0.02, every=10):
    """:func:`simulate` in plain numba (values only), same arguments and result."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    _check(X, n_steps, every)
    out = np.empty((X.shape[0], n_steps // every))
    _integrate_numba(X, n_steps, dt, every, out)
    return out
