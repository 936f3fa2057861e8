"""One-dimensional heat equation with a spatially varying diffusivity alpha(x).

Physics
-------
``du/dt = d/dx (alpha(x) du/dx)`` on a rod of cells ``i = 0 .. n-1``, ``dx`` apart, the end
cells held at ``left`` and ``right`` [K].

Discretisation
--------------
Conservative explicit (forward-Euler) finite volumes: the diffusivity at the face between
cells ``i`` and ``i+1`` is the mean of the two cell values,

    u_new[i] = u[i] + dt/dx**2 * (a[i+1/2] (u[i+1] - u[i]) - a[i-1/2] (u[i] - u[i-1])),

stable for ``max(alpha) * dt / dx**2 <= 1/2`` (not checked: alpha may be dual numbers).
One CUDA thread per cell; two buffers swap every step, so the caller's arrays are never
written.
"""
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "simulate", "step"]

THREADS_PER_BLOCK = 64
"""Threads per block of the 1-D launches."""


@cuda.jit
def step(u, u_new, alpha, c, left, right):
    """One explicit step; ``c = dt / dx**2``."""
    i = cuda.grid(1)
    n = u.shape[0]
    if i >= n:
        return
    if i == 0:
        u_new[i] = left
    elif i == n - 1:
        u_new[i] = right
    else:
        a_minus = 0.5 * (alpha[i - 1] + alpha[i])
        a_plus = 0.5 * (alpha[i] + alpha[i + 1])
        u_new[i] = u[i] + c * (a_plus * (u[i + 1] - u[i]) - a_minus * (u[i] - u[i - 1]))


def simulate(alpha, u0, n_steps=100, dt=1.0e-4, dx=0.025, left=0.0, right=0.0,
             threads_per_block=THREADS_PER_BLOCK):
    """Return the temperatures after ``n_steps`` steps with diffusivity field ``alpha``.

    Parameters
    ----------
    alpha : numpy.ndarray
        Diffusivity of every cell [m^2/s], shape ``(n,)``.
    u0 : numpy.ndarray
        Initial temperatures [K], shape ``(n,)``.
    n_steps : int
        Number of time steps.
    dt, dx : float
        Time step [s] and cell spacing [m]; stable for ``max(alpha) dt / dx**2 <= 1/2``.
    left, right : float
        Temperatures held at cell 0 and cell n-1 [K].
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    numpy.ndarray
        Temperatures at ``t = n_steps * dt``, shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np
    >>> u = simulate(np.ones(5), np.array([0.0, 0.0, 1.0, 0.0, 0.0]), n_steps=1, dt=0.1,
    ...              dx=1.0)
    >>> u.round(3).tolist()
    [0.0, 0.1, 0.8, 0.1, 0.0]
    """
    n = u0.shape[0]
    blocks = (n + threads_per_block - 1) // threads_per_block
    c = dt / dx ** 2
    a = cuda.to_device(alpha)
    u = cuda.to_device(u0)
    u_new = cuda.device_array_like(u)
    for _ in range(n_steps):
        step[blocks, threads_per_block](u, u_new, a, c, left, right)
        u, u_new = u_new, u
    return u.copy_to_host()
