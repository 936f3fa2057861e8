"""Gray-Scott reaction-diffusion on a periodic 2-D grid, explicit Euler, one thread per cell.

Physics
-------
Two chemical species with concentrations ``u`` (the substrate) and ``v`` (the autocatalyst),
both dimensionless, react as ``U + 2V -> 3V`` and ``V -> P`` while diffusing:

    du/dt = Du lap(u) - u v**2 + F (1 - u),
    dv/dt = Dv lap(v) + u v**2 - (F + k) v.

``F`` [1/time] is the feed rate (``u`` replenished towards 1), ``k`` [1/time] the kill rate
(``v`` removed), ``Du`` and ``Dv`` [length^2/time] the diffusivities. The defaults use
grid units (``dx = 1``, ``dt = 1``) with ``Du = 0.16``, ``Dv = 0.08``, ``F = 0.035``,
``k = 0.065``, which grows spots and stripes ("Pearson's" parameter map).

Discretisation
--------------
5-point Laplacian with spacing ``dx`` on a periodic grid (indices wrap around), forward Euler
with step ``dt``:

    u_new = u + dt (Du lap_h(u) - u v**2 + F (1 - u)),
    v_new = v + dt (Dv lap_h(v) + u v**2 - (F + k) v),

with ``lap_h(u) = (u[i-1,j] + u[i+1,j] + u[i,j-1] + u[i,j+1] - 4 u[i,j]) / dx**2``. Diffusion
is stable for ``max(Du, Dv) dt / dx**2 <= 1/4``; not checked here. One kernel launch per step
updates both species; the buffers are swapped after every step.
"""
import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "simulate", "step"]

THREADS_PER_BLOCK = (16, 16)
"""Threads per block of the 2-D launches."""


@cuda.jit
def step(u, v, u_new, v_new, ru, rv, F, k, dt):
    """One explicit Euler step of cell ``(i, j)``.

    ``ru = Du dt / dx**2`` and ``rv = Dv dt / dx**2`` are the diffusion numbers.
    """
    i, j = cuda.grid(2)
    nx = u.shape[0]
    ny = u.shape[1]
    if i >= nx or j >= ny:
        return
    im = (i - 1) % nx
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


def default_initial_state(n=64, seed=0):
    """Return the classic start: ``u = 1, v = 0`` with a perturbed square in the middle.

    Parameters
    ----------
    n : int
        Cells per side.
    seed : int
        Seed of the random generator for the 1 % noise.

    Returns
    -------
    u0, v0 : numpy.ndarray
        Shape ``(n, n)`` float64; inside the central square of side ``n // 4``, ``u = 0.5`` and
        ``v = 0.25``; uniform noise of amplitude 0.01 added everywhere.
    """
    rng = np.random.default_rng(seed)
    u0 = np.ones((n, n))
    v0 = np.zeros((n, n))
    lo = n // 2 - n // 8
    hi = lo + n // 4
    u0[lo:hi, lo:hi] = 0.5
    v0[lo:hi, lo:hi] = 0.25
    u0 += 0.01 * rng.uniform(-1.0, 1.0, size=(n, n))
    v0 += 0.01 * rng.uniform(-1.0, 1.0, size=(n, n))
    return u0, v0


def simulate(u0, v0, n_steps=1000, F=0.035, k=0.065, Du=0.16, Dv=0.08, dt=1.0, dx=1.0,
             threads_per_block=THREADS_PER_BLOCK):
    """Return both concentrations after ``n_steps`` explicit steps of the Gray-Scott model.

    Parameters
    ----------
    u0, v0 : numpy.ndarray
        Initial concentrations of the substrate and the autocatalyst, shape ``(nx, ny)``;
        never modified.
    n_steps : int
        Number of time steps.
    F : float
        Feed rate [1/time].
    k : float
        Kill rate [1/time].
    Du, Dv : float
        Diffusivities of ``u`` and ``v`` [length^2/time].
    dt : float
        Time step [time].
    dx : float
        Cell spacing [length].
    threads_per_block : tuple of int
        CUDA block shape.

    Returns
    -------
    u, v : numpy.ndarray
        Concentrations at ``t = n_steps dt``, shape ``(nx, ny)`` each.
    """
    nx, ny = u0.shape
    tx, ty = threads_per_block
    blocks = ((nx + tx - 1) // tx, (ny + ty - 1) // ty)
    ru = Du * dt / dx ** 2
    rv = Dv * dt / dx ** 2
    u = cuda.to_device(u0)
    v = cuda.to_device(v0)
    u_new = cuda.device_array_like(u)
    v_new = cuda.device_array_like(v)
    for _ in range(n_steps):
        step[blocks, threads_per_block](u, v, u_new, v_new, ru, rv, F, k, dt)
        u, u_new = u_new, u
        v, v_new = v_new, v
    return u.copy_to_host(), v.copy_to_host()
