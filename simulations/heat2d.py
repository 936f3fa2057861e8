"""Two-dimensional heat equation, explicit 5-point stencil, one CUDA thread per cell (2-D grid).

Physics
-------
The temperature ``u(x, y, t)`` of a plate obeys

    du/dt = alpha * (d2u/dx2 + d2u/dy2),

with ``alpha`` the thermal diffusivity [m^2/s].

Discretisation
--------------
Cells ``(i, j)`` (``i`` along axis 0 with spacing ``dx``, ``j`` along axis 1 with spacing
``dy``, both [m]) advance by forward Euler with the 5-point Laplacian:

    u_new[i, j] = u[i, j] + rx * (u[i-1, j] - 2 u[i, j] + u[i+1, j])
                          + ry * (u[i, j-1] - 2 u[i, j] + u[i, j+1]),
    rx = alpha * dt / dx**2,   ry = alpha * dt / dy**2.

Stable for ``rx + ry <= 1/2`` (``alpha*dt/dx**2 <= 1/4`` on a square grid); not checked here.

Boundary condition
------------------
Dirichlet: every cell on the outer edge of the grid holds ``boundary`` [K] after every step
(its initial value is overwritten by the first step).

Each step is one kernel launch over a 2-D grid of ``(16, 16)`` blocks, followed by a swap of
the two device buffers; the caller's array is never written.
"""
import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "simulate", "step"]

THREADS_PER_BLOCK = (16, 16)
"""Threads per block of the 2-D launches."""


@cuda.jit
def step(u, u_new, rx, ry, boundary):
    """One FTCS step of the 5-point stencil; edge cells are set to ``boundary``."""
    i, j = cuda.grid(2)
    nx = u.shape[0]
    ny = u.shape[1]
    if i >= nx or j >= ny:
        return
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        u_new[i, j] = boundary
    else:
        u_new[i, j] = (u[i, j]
                       + rx * (u[i - 1, j] - 2.0 * u[i, j] + u[i + 1, j])
                       + ry * (u[i, j - 1] - 2.0 * u[i, j] + u[i, j + 1]))


def default_initial_state(n=65):
    """Return a Gaussian hot spot in the middle of the unit square.

    Parameters
    ----------
    n : int
        Cells per side; with the default ``dx=1/64`` of :func:`simulate`, ``n=65`` spans
        ``[0, 1] x [0, 1]`` m.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, n)``, float64 temperatures [K],
        ``exp(-((x - 0.5)**2 + (y - 0.5)**2) / 0.1**2)``.
    """
    x = np.linspace(0.0, 1.0, n)
    xx, yy = np.meshgrid(x, x, indexing="ij")
    return np.exp(-((xx - 0.5) ** 2 + (yy - 0.5) ** 2) / 0.1 ** 2)


def simulate(u0, n_steps=200, alpha=0.05, dt=1.0e-3, dx=1.0 / 64, dy=None, boundary=0.0,
             threads_per_block=THREADS_PER_BLOCK):
    """Return the temperatures after ``n_steps`` explicit steps of the 2-D heat equation.

    Parameters
    ----------
    u0 : numpy.ndarray
        Initial temperatures [K], shape ``(nx, ny)``; copied to the device, never modified.
    n_steps : int
        Number of time steps.
    alpha : float
        Thermal diffusivity [m^2/s].
    dt : float
        Time step [s]; stability needs ``alpha*dt*(1/dx**2 + 1/dy**2) <= 1/2``
        (defaults: 0.41).
    dx : float
        Cell spacing along axis 0 [m].
    dy : float or None
        Cell spacing along axis 1 [m]; ``None`` means ``dy = dx``.
    boundary : float
        Dirichlet temperature [K] of the edge cells.
    threads_per_block : tuple of int
        CUDA block shape.

    Returns
    -------
    numpy.ndarray
        Temperatures at ``t = n_steps * dt``, shape ``(nx, ny)``.
    """
    if dy is None:
        dy = dx
    nx, ny = u0.shape
    tx, ty = threads_per_block
    blocks = ((nx + tx - 1) // tx, (ny + ty - 1) // ty)
    rx = alpha * dt / dx ** 2
    ry = alpha * dt / dy ** 2
    u = cuda.to_device(u0)
    u_new = cuda.device_array_like(u)
    for _ in range(n_steps):
        step[blocks, threads_per_block](u, u_new, rx, ry, boundary)
        u, u_new = u_new, u
    return u.copy_to_host()
