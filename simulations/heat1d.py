"""One-dimensional heat equation, explicit 3-point stencil, one CUDA thread per cell.

Physics
-------
The temperature ``u(x, t)`` of a thin rod obeys the heat (diffusion) equation

    du/dt = alpha * d2u/dx2,

with ``alpha`` the thermal diffusivity [m^2/s].

Discretisation
--------------
Cells ``i = 0 .. n-1`` sit ``dx`` [m] apart; time advances in steps of ``dt`` [s] with the
forward-Euler (FTCS) update

    u_new[i] = u[i] + r * (u[i-1] - 2*u[i] + u[i+1]),      r = alpha * dt / dx**2.

The scheme is stable for ``r = alpha*dt/dx**2 <= 1/2``; it is not checked here (the parameters
may be dual numbers), so choose ``dt`` accordingly.

Boundary conditions
-------------------
* Dirichlet (default): the end cells ``0`` and ``n-1`` hold the prescribed temperatures
  ``left`` and ``right`` [K] after every step (their initial values are overwritten by the
  first step); the interior cells follow the stencil.
* Periodic (``periodic=True``): cell ``n-1`` neighbours cell ``0``; ``left`` and ``right`` are
  ignored. The total heat ``sum(u) * dx`` is then conserved exactly (up to rounding).

Each step launches one kernel over the cells and then swaps the two buffers, so the caller's
array is never written.
"""
import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "simulate", "step_dirichlet",
           "step_periodic"]

THREADS_PER_BLOCK = 128
"""Threads per block of the 1-D launches."""


@cuda.jit
def step_dirichlet(u, u_new, r, left, right):
    """One FTCS step with fixed end temperatures ``left`` (cell 0) and ``right`` (cell n-1)."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if i == 0:
        u_new[i] = left
    elif i == n - 1:
        u_new[i] = right
    else:
        u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@cuda.jit
def step_periodic(u, u_new, r):
    """One FTCS step on a ring of cells (cell n-1 neighbours cell 0)."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    u_new[i] = u[i] + r * (u[(i - 1) % n] - 2.0 * u[i] + u[(i + 1) % n])


def default_initial_state(n=101):
    """Return a Gaussian hot spot on ``[0, 1]``: ``u0[i] = exp(-((x_i - 0.5) / 0.1)**2)``.

    Parameters
    ----------
    n : int
        Number of cells; with the default ``dx=0.01`` of :func:`simulate`, ``n=101`` spans
        ``x = 0 .. 1`` m.

    Returns
    -------
    numpy.ndarray
        Shape ``(n,)``, float64 temperatures [K] (close to zero at both ends).
    """
    x = np.linspace(0.0, 1.0, n)
    return np.exp(-(((x - 0.5) / 0.1) ** 2))


def simulate(u0, n_steps=500, alpha=1.0, dt=4.0e-5, dx=0.01, left=0.0, right=0.0,
             periodic=False, threads_per_block=THREADS_PER_BLOCK):
    """Return the temperatures after ``n_steps`` explicit steps of the 1-D heat equation.

    Parameters
    ----------
    u0 : numpy.ndarray
        Initial temperatures [K], shape ``(n,)``; copied to the device, never modified.
    n_steps : int
        Number of time steps.
    alpha : float
        Thermal diffusivity [m^2/s].
    dt : float
        Time step [s]. Stability needs ``alpha*dt/dx**2 <= 1/2`` (defaults: 0.4).
    dx : float
        Cell spacing [m].
    left, right : float
        Dirichlet temperatures [K] of cell 0 and cell n-1 (ignored when ``periodic``).
    periodic : bool
        Wrap the rod into a ring instead of fixing its ends.
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    numpy.ndarray
        Temperatures at ``t = n_steps * dt``, shape ``(n,)``.
    """
    n = u0.shape[0]
    blocks = (n + threads_per_block - 1) // threads_per_block
    r = alpha * dt / dx ** 2
    u = cuda.to_device(u0)
    u_new = cuda.device_array_like(u)
    for _ in range(n_steps):
        if periodic:
            step_periodic[blocks, threads_per_block](u, u_new, r)
        else:
            step_dirichlet[blocks, threads_per_block](u, u_new, r, left, right)
        u, u_new = u_new, u
    return u.copy_to_host()
