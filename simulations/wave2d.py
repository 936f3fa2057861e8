"""Two-dimensional damped wave equation (a clamped membrane), leapfrog in time.

Physics
-------
The transverse displacement ``u(x, y, t)`` [m] of a membrane with wave speed ``c`` [m/s] and
linear damping rate ``damping`` (gamma) [1/s] obeys

    d2u/dt2 = c**2 * (d2u/dx2 + d2u/dy2) - gamma * du/dt.

The edges are clamped: ``u = 0`` on the outer cells of the grid.

Discretisation
--------------
Centred differences in space (5-point Laplacian, spacings ``dx``, ``dy`` [m]) and in time
(step ``dt`` [s]), with the damping term centred as ``(u_next - u_prev) / (2 dt)``:

    (1 + g) u_next = 2 u - (1 - g) u_prev + Cx (u[i-1,j] - 2u + u[i+1,j])
                                           + Cy (u[i,j-1] - 2u + u[i,j+1]),
    Cx = (c dt / dx)**2,   Cy = (c dt / dy)**2,   g = gamma dt / 2.

Three buffers (``u_prev``, ``u``, ``u_next``) rotate after every step. The level before the
start comes from a second-order Taylor step backwards from the initial displacement ``u0`` and
velocity ``v0``:

    u_prev = u0 - dt v0 (1 + g) + (Cx lap_x u0 + Cy lap_y u0) / 2.

Stability (CFL): ``Cx + Cy <= 1``, i.e. ``c dt / dx <= 1/sqrt(2)`` on a square grid; not
checked here.

Output
------
The displacement ``u`` at ``t = n_steps dt`` and the leapfrog velocity
``v = (u(t) - u(t - dt)) / dt`` (a second-order estimate of du/dt at ``t - dt/2``).
"""
import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "simulate", "start", "step",
           "half_step_velocity"]

THREADS_PER_BLOCK = (16, 16)
"""Threads per block of the 2-D launches."""


@cuda.jit
def start(u0, v0, u_prev, cx, cy, dt, g):
    """Fill ``u_prev`` with the Taylor estimate of ``u(-dt)``; edge cells are set to zero."""
    i, j = cuda.grid(2)
    nx = u0.shape[0]
    ny = u0.shape[1]
    if i >= nx or j >= ny:
        return
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        u_prev[i, j] = 0.0
    else:
        lap = (cx * (u0[i - 1, j] - 2.0 * u0[i, j] + u0[i + 1, j])
               + cy * (u0[i, j - 1] - 2.0 * u0[i, j] + u0[i, j + 1]))
        u_prev[i, j] = u0[i, j] - dt * v0[i, j] * (1.0 + g) + 0.5 * lap


@cuda.jit
def step(u_prev, u, u_next, cx, cy, g):
    """One leapfrog step ``(u_prev, u) -> u_next``; edge cells are clamped to zero."""
    i, j = cuda.grid(2)
    nx = u.shape[0]
    ny = u.shape[1]
    if i >= nx or j >= ny:
        return
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        u_next[i, j] = 0.0
    else:
        lap = (cx * (u[i - 1, j] - 2.0 * u[i, j] + u[i + 1, j])
               + cy * (u[i, j - 1] - 2.0 * u[i, j] + u[i, j + 1]))
        u_next[i, j] = (2.0 * u[i, j] - (1.0 - g) * u_prev[i, j] + lap) / (1.0 + g)


@cuda.jit
def half_step_velocity(u_prev, u, dt, v):
    """Store the leapfrog velocity ``(u - u_prev) / dt`` in ``v``."""
    i, j = cuda.grid(2)
    if i < u.shape[0] and j < u.shape[1]:
        v[i, j] = (u[i, j] - u_prev[i, j]) / dt


def default_initial_state(n=65):
    """Return a Gaussian bump at rest in the middle of the unit square.

    Parameters
    ----------
    n : int
        Cells per side; with the default ``dx=1/64`` of :func:`simulate`, ``n=65`` spans
        ``[0, 1] x [0, 1]`` m.

    Returns
    -------
    u0, v0 : numpy.ndarray
        Shape ``(n, n)`` float64 displacement [m] ``0.01 exp(-r**2 / 0.05**2)`` (``r`` the
        distance to the centre) and zero velocity [m/s].
    """
    x = np.linspace(0.0, 1.0, n)
    xx, yy = np.meshgrid(x, x, indexing="ij")
    u0 = 0.01 * np.exp(-((xx - 0.5) ** 2 + (yy - 0.5) ** 2) / 0.05 ** 2)
    return u0, np.zeros_like(u0)


def simulate(u0, v0, n_steps=200, c=1.0, dt=5.0e-3, dx=1.0 / 64, dy=None, damping=0.0,
             threads_per_block=THREADS_PER_BLOCK):
    """Return displacement and velocity after ``n_steps`` leapfrog steps of the wave equation.

    Parameters
    ----------
    u0 : numpy.ndarray
        Initial displacement [m], shape ``(nx, ny)``; never modified. Edge values are ignored
        (the edges are clamped at zero).
    v0 : numpy.ndarray
        Initial velocity [m/s], same shape; never modified.
    n_steps : int
        Number of time steps.
    c : float
        Wave speed [m/s].
    dt : float
        Time step [s]; stability needs ``(c dt)**2 (1/dx**2 + 1/dy**2) <= 1``
        (defaults: 0.2).
    dx : float
        Cell spacing along axis 0 [m].
    dy : float or None
        Cell spacing along axis 1 [m]; ``None`` means ``dy = dx``.
    damping : float
        Linear damping rate gamma [1/s]; 0 conserves the discrete energy.
    threads_per_block : tuple of int
        CUDA block shape.

    Returns
    -------
    u, v : numpy.ndarray
        Displacement at ``t = n_steps dt`` and the leapfrog velocity ``(u(t) - u(t-dt)) / dt``.
    """
    if dy is None:
        dy = dx
    nx, ny = u0.shape
    tx, ty = threads_per_block
    blocks = ((nx + tx - 1) // tx, (ny + ty - 1) // ty)
    cx = (c * dt / dx) ** 2
    cy = (c * dt / dy) ** 2
    g = 0.5 * damping * dt
    u = cuda.to_device(u0)
    v = cuda.to_device(v0)
    u_prev = cuda.device_array_like(u)
    u_next = cuda.device_array_like(u)
    start[blocks, threads_per_block](u, v, u_prev, cx, cy, dt, g)
    for _ in range(n_steps):
        step[blocks, threads_per_block](u_prev, u, u_next, cx, cy, g)
        u_prev, u, u_next = u, u_next, u_prev
    half_step_velocity[blocks, threads_per_block](u_prev, u, dt, v)
    return u.copy_to_host(), v.copy_to_host()
