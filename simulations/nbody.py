"""Gravitational N-body problem, all pairs, softened, kick-drift-kick leapfrog.

Physics
-------
Bodies ``i = 0 .. n-1`` with masses ``m_i``, positions ``x_i`` and velocities ``v_i`` attract
each other by Newtonian gravity with Plummer softening length ``eps``:

    a_i = G * sum_{j != i} m_j (x_j - x_i) / (|x_j - x_i|**2 + eps**2)**(3/2).

``G`` is the gravitational constant (6.674e-11 m^3 kg^-1 s^-2 in SI units; the defaults use
N-body units with ``G = 1``, total mass 1 and a system of radius about 1). The softening
removes the singularity of close encounters; with ``eps > 0`` the forces are still pairwise
antisymmetric, so the total momentum ``sum m_i v_i`` is conserved.

Discretisation
--------------
Kick-drift-kick leapfrog (velocity Verlet), time step ``dt``, symplectic and second order:

    v += (dt/2) a(x);   x += dt v;   a = a(x);   v += (dt/2) a.

Kernels
-------
``accelerations`` runs one thread per body with an inner loop over all bodies, calling the
device function ``pair_acceleration``; ``kick_drift`` and ``kick`` are elementwise, one thread
per body. Positions, velocities and accelerations are ``(n, 3)`` arrays.
"""
import math

import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "simulate", "pair_acceleration",
           "accelerations", "kick_drift", "kick"]

THREADS_PER_BLOCK = 128
"""Threads per block of the 1-D launches."""


@cuda.jit(device=True)
def pair_acceleration(xi, yi, zi, xj, yj, zj, mj, g, eps2):
    """Return the acceleration ``(ax, ay, az)`` of a body at ``(xi, yi, zi)`` due to a body of
    mass ``mj`` at ``(xj, yj, zj)``; ``g`` is G and ``eps2`` the squared softening length."""
    dx = xj - xi
    dy = yj - yi
    dz = zj - zi
    r2 = dx * dx + dy * dy + dz * dz + eps2
    s = g * mj / (r2 * math.sqrt(r2))
    return s * dx, s * dy, s * dz


@cuda.jit
def accelerations(pos, mass, g, eps, acc):
    """Store in ``acc[i]`` the softened gravitational acceleration of body ``i``."""
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    xi = pos[i, 0]
    yi = pos[i, 1]
    zi = pos[i, 2]
    eps2 = eps * eps
    ax = 0.0
    ay = 0.0
    az = 0.0
    for j in range(n):
        if j != i:
            dax, day, daz = pair_acceleration(xi, yi, zi, pos[j, 0], pos[j, 1], pos[j, 2],
                                              mass[j], g, eps2)
            ax += dax
            ay += day
            az += daz
    acc[i, 0] = ax
    acc[i, 1] = ay
    acc[i, 2] = az


@cuda.jit
def kick_drift(pos, vel, acc, dt):
    """Half kick ``v += dt/2 a`` then drift ``x += dt v`` of body ``i``."""
    i = cuda.grid(1)
    if i >= pos.shape[0]:
        return
    for d in range(3):
        vel[i, d] = vel[i, d] + 0.5 * dt * acc[i, d]
        pos[i, d] = pos[i, d] + dt * vel[i, d]


@cuda.jit
def kick(vel, acc, dt):
    """Half kick ``v += dt/2 a`` of body ``i``."""
    i = cuda.grid(1)
    if i >= vel.shape[0]:
        return
    for d in range(3):
        vel[i, d] = vel[i, d] + 0.5 * dt * acc[i, d]


def default_initial_state(n=64, seed=0):
    """Return a small random cluster in N-body units (G = 1, total mass 1).

    Parameters
    ----------
    n : int
        Number of bodies.
    seed : int
        Seed of the random generator.

    Returns
    -------
    positions, velocities, masses : numpy.ndarray
        ``(n, 3)`` positions uniform in the unit ball, ``(n, 3)`` velocities of random
        directions with dispersion 0.3 and zero total momentum, ``(n,)`` equal masses ``1/n``.
    """
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    positions = direction * rng.uniform(size=(n, 1)) ** (1.0 / 3.0)
    velocities = 0.3 * rng.normal(size=(n, 3))
    velocities -= velocities.mean(axis=0)
    masses = np.full(n, 1.0 / n)
    return positions, velocities, masses


def simulate(positions, velocities, masses, n_steps=100, G=1.0, eps=0.05, dt=1.0e-3,
             threads_per_block=THREADS_PER_BLOCK):
    """Return positions and velocities after ``n_steps`` leapfrog steps of softened gravity.

    Parameters
    ----------
    positions : numpy.ndarray
        Initial positions, shape ``(n, 3)`` [length]; never modified.
    velocities : numpy.ndarray
        Initial velocities, shape ``(n, 3)`` [length/time]; never modified.
    masses : numpy.ndarray
        Masses, shape ``(n,)`` [mass].
    n_steps : int
        Number of kick-drift-kick steps.
    G : float
        Gravitational constant [length^3 mass^-1 time^-2].
    eps : float
        Softening length [length]; must be > 0 if two bodies can coincide.
    dt : float
        Time step [time]; keep it well below the shortest orbital time at scale ``eps``.
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    positions, velocities : numpy.ndarray
        Shape ``(n, 3)`` each, at ``t = n_steps dt``.
    """
    n = positions.shape[0]
    blocks = (n + threads_per_block - 1) // threads_per_block
    pos = cuda.to_device(positions)
    vel = cuda.to_device(velocities)
    mass = cuda.to_device(masses)
    acc = cuda.device_array_like(pos)
    accelerations[blocks, threads_per_block](pos, mass, G, eps, acc)
    for _ in range(n_steps):
        kick_drift[blocks, threads_per_block](pos, vel, acc, dt)
        accelerations[blocks, threads_per_block](pos, mass, G, eps, acc)
        kick[blocks, threads_per_block](vel, acc, dt)
    return pos.copy_to_host(), vel.copy_to_host()
