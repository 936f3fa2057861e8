"""An ensemble of independent damped, driven pendulums, classical RK4, one thread per member.

Physics
-------
Each member's angle ``theta`` [rad] from the downward vertical and angular velocity ``omega``
[rad/s] obey

    dtheta/dt = omega,
    domega/dt = -(g/L) sin(theta) - damping * omega + drive_amplitude * cos(drive_frequency * t),

with ``g_over_l`` = g/L [1/s^2] (gravity over pendulum length), ``damping`` [1/s] the linear
friction rate, ``drive_amplitude`` [rad/s^2] the angular acceleration of the periodic drive and
``drive_frequency`` [rad/s] its angular frequency. All members share these parameters and
differ only in their initial angle and velocity. With ``damping = 0`` and
``drive_amplitude = 0`` the energy per unit ``m L^2``,
``E = omega**2 / 2 + (g/L) (1 - cos(theta))``, is conserved. The defaults
(``g/L = 1``, damping 0.5, drive 1.2 at 2/3 rad/s) lie in the driven pendulum's chaotic regime
for some initial conditions, so nearby members can separate quickly.

Discretisation
--------------
Classical fourth-order Runge-Kutta with step ``dt`` [s], written as the device function
``rk4_step`` (calling the right-hand side ``angular_acceleration``). Each launch of ``advance``
moves every member one step, in place, from time ``t = t0 + step * dt``.
"""
import math

import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "simulate", "angular_acceleration",
           "rk4_step", "advance"]

THREADS_PER_BLOCK = 128
"""Threads per block of the 1-D launches."""


@cuda.jit(device=True)
def angular_acceleration(theta, omega, t, damping, drive_amplitude, drive_frequency, g_over_l):
    """Return ``domega/dt`` of a damped driven pendulum at angle ``theta``, speed ``omega``,
    time ``t``."""
    return (-g_over_l * math.sin(theta) - damping * omega
            + drive_amplitude * math.cos(drive_frequency * t))


@cuda.jit(device=True)
def rk4_step(theta, omega, t, dt, damping, drive_amplitude, drive_frequency, g_over_l):
    """Return ``(theta, omega)`` advanced from time ``t`` by one classical RK4 step ``dt``."""
    half = 0.5 * dt
    k1_theta = omega
    k1_omega = angular_acceleration(theta, omega, t, damping, drive_amplitude,
                                    drive_frequency, g_over_l)
    k2_theta = omega + half * k1_omega
    k2_omega = angular_acceleration(theta + half * k1_theta, omega + half * k1_omega,
                                    t + half, damping, drive_amplitude, drive_frequency,
                                    g_over_l)
    k3_theta = omega + half * k2_omega
    k3_omega = angular_acceleration(theta + half * k2_theta, omega + half * k2_omega,
                                    t + half, damping, drive_amplitude, drive_frequency,
                                    g_over_l)
    k4_theta = omega + dt * k3_omega
    k4_omega = angular_acceleration(theta + dt * k3_theta, omega + dt * k3_omega,
                                    t + dt, damping, drive_amplitude, drive_frequency,
                                    g_over_l)
    sixth = dt / 6.0
    theta_new = theta + sixth * (k1_theta + 2.0 * k2_theta + 2.0 * k3_theta + k4_theta)
    omega_new = omega + sixth * (k1_omega + 2.0 * k2_omega + 2.0 * k3_omega + k4_omega)
    return theta_new, omega_new


@cuda.jit
def advance(theta, omega, t, dt, damping, drive_amplitude, drive_frequency, g_over_l):
    """Advance member ``i`` by one RK4 step from time ``t``, in place."""
    i = cuda.grid(1)
    if i >= theta.shape[0]:
        return
    theta_new, omega_new = rk4_step(theta[i], omega[i], t, dt, damping, drive_amplitude,
                                    drive_frequency, g_over_l)
    theta[i] = theta_new
    omega[i] = omega_new


def default_initial_state(n=1024):
    """Return an ensemble at rest with angles spread evenly over ``[-pi/2, pi/2]``.

    Parameters
    ----------
    n : int
        Number of members.

    Returns
    -------
    theta0, omega0 : numpy.ndarray
        Shape ``(n,)`` float64 initial angles [rad] and zero angular velocities [rad/s].
    """
    theta0 = np.linspace(-0.5 * np.pi, 0.5 * np.pi, n)
    return theta0, np.zeros(n)


def simulate(theta0, omega0, n_steps=1000, dt=0.01, damping=0.5, drive_amplitude=1.2,
             drive_frequency=2.0 / 3.0, g_over_l=1.0, t0=0.0,
             threads_per_block=THREADS_PER_BLOCK):
    """Return the angles and angular velocities of every member after ``n_steps`` RK4 steps.

    Parameters
    ----------
    theta0 : numpy.ndarray
        Initial angles [rad], shape ``(n,)``; never modified.
    omega0 : numpy.ndarray
        Initial angular velocities [rad/s], shape ``(n,)``; never modified.
    n_steps : int
        Number of time steps.
    dt : float
        Time step [s].
    damping : float
        Linear damping rate [1/s].
    drive_amplitude : float
        Amplitude of the driving angular acceleration [rad/s^2].
    drive_frequency : float
        Angular frequency of the drive [rad/s].
    g_over_l : float
        Gravity over pendulum length, g/L [1/s^2] (the small-angle frequency squared).
    t0 : float
        Start time [s] (sets the phase of the drive).
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    theta, omega : numpy.ndarray
        Shape ``(n,)`` each, at ``t = t0 + n_steps dt``.
    """
    n = theta0.shape[0]
    blocks = (n + threads_per_block - 1) // threads_per_block
    theta = cuda.to_device(theta0)
    omega = cuda.to_device(omega0)
    for step in range(n_steps):
        t = t0 + step * dt
        advance[blocks, threads_per_block](theta, omega, t, dt, damping, drive_amplitude,
                                           drive_frequency, g_over_l)
    return theta.copy_to_host(), omega.copy_to_host()
