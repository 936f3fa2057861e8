"""A hanging chain of point masses joined by damped springs, in a vertical plane.

Physics
-------
Nodes ``i = 0 .. n-1`` of mass ``mass`` [kg] at positions ``x_i = (x, y)`` [m] with velocities
``v_i`` [m/s]; neighbouring nodes ``i`` and ``i+1`` are joined by a spring of stiffness ``k``
[N/m], rest length ``rest_length`` [m] and a dashpot of damping coefficient ``c`` [N s/m]
acting along the spring. Gravity ``gravity`` [m/s^2] pulls along ``-y``. The force on node
``a`` from the spring to node ``b`` is

    d = x_b - x_a,   L = |d|,   e = d / L,
    F_ab = (k (L - rest_length) + c (v_b - v_a) . e) e,

and node ``i`` feels ``F_i = F_{i,i-1} + F_{i,i+1} - mass * gravity * e_y``. Nodes flagged in
``pinned`` stay where they are (the default pins node 0, so the chain swings like a rope
hanging from a nail).

Discretisation
--------------
Symplectic (semi-implicit) Euler with time step ``dt`` [s]:

    v_new = v + dt F(x, v) / mass,     x_new = x + dt v_new.

Stable for roughly ``dt < 2 / omega_max`` with ``omega_max = 2 sqrt(k / mass)``; not checked
here. One thread per node reads the old state of itself and its two neighbours and writes a
second pair of buffers; the buffers are swapped after every step.
"""
import math

import numpy as np
from dualgpu import cuda

__all__ = ["THREADS_PER_BLOCK", "default_initial_state", "energy", "node_energy", "simulate",
           "spring_force", "step"]

THREADS_PER_BLOCK = 128
"""Threads per block of the 1-D launches."""


@cuda.jit(device=True)
def spring_force(xa, ya, vxa, vya, xb, yb, vxb, vyb, k, c, rest_length):
    """Return the force ``(fx, fy)`` on node a from the damped spring joining it to node b."""
    dx = xb - xa
    dy = yb - ya
    length = math.sqrt(dx * dx + dy * dy)
    ex = dx / length
    ey = dy / length
    closing = (vxb - vxa) * ex + (vyb - vya) * ey
    f = k * (length - rest_length) + c * closing
    return f * ex, f * ey


@cuda.jit
def step(pos, vel, pos_new, vel_new, pinned, k, c, rest_length, mass, gravity, dt):
    """One symplectic Euler step of node ``i``: old state in ``pos, vel``, new in
    ``pos_new, vel_new``."""
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    x = pos[i, 0]
    y = pos[i, 1]
    vx = vel[i, 0]
    vy = vel[i, 1]
    if pinned[i] != 0:
        pos_new[i, 0] = x
        pos_new[i, 1] = y
        vel_new[i, 0] = 0.0
        vel_new[i, 1] = 0.0
        return
    fx = 0.0
    fy = -mass * gravity
    if i > 0:
        sx, sy = spring_force(x, y, vx, vy, pos[i - 1, 0], pos[i - 1, 1],
                              vel[i - 1, 0], vel[i - 1, 1], k, c, rest_length)
        fx += sx
        fy += sy
    if i < n - 1:
        sx, sy = spring_force(x, y, vx, vy, pos[i + 1, 0], pos[i + 1, 1],
                              vel[i + 1, 0], vel[i + 1, 1], k, c, rest_length)
        fx += sx
        fy += sy
    vx = vx + dt * fx / mass
    vy = vy + dt * fy / mass
    vel_new[i, 0] = vx
    vel_new[i, 1] = vy
    pos_new[i, 0] = x + dt * vx
    pos_new[i, 1] = y + dt * vy


@cuda.jit
def node_energy(pos, vel, k, rest_length, mass, gravity, out):
    """Store in ``out[i]`` node ``i``'s kinetic and gravitational energy plus the elastic energy
    of the spring joining it to node ``i+1``."""
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    e = 0.5 * mass * (vel[i, 0] * vel[i, 0] + vel[i, 1] * vel[i, 1]) + mass * gravity * pos[i, 1]
    if i < n - 1:
        dx = pos[i + 1, 0] - pos[i, 0]
        dy = pos[i + 1, 1] - pos[i, 1]
        stretch = math.sqrt(dx * dx + dy * dy) - rest_length
        e += 0.5 * k * stretch * stretch
    out[i] = e


def energy(positions, velocities, k=1000.0, rest_length=0.05, mass=0.01, gravity=9.81,
           threads_per_block=THREADS_PER_BLOCK):
    """Return the chain's mechanical energy [J]: kinetic, gravitational and elastic.

    Parameters
    ----------
    positions, velocities : numpy.ndarray
        The state, shape ``(n, 2)`` each (e.g. what :func:`simulate` returns).
    k, rest_length, mass, gravity : float
        As in :func:`simulate` (the damping does not store energy).
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    float
        ``sum_i (m |v_i|^2 / 2 + m g y_i) + sum_springs k (L - rest_length)^2 / 2``; a Dual
        when the state or the parameters carry derivatives.
    """
    n = positions.shape[0]
    blocks = (n + threads_per_block - 1) // threads_per_block
    pos = cuda.to_device(positions)
    vel = cuda.to_device(velocities)
    out = cuda.device_array(n, dtype=positions.dtype)
    node_energy[blocks, threads_per_block](pos, vel, k, rest_length, mass, gravity, out)
    return out.copy_to_host().sum()


def default_initial_state(n=32, rest_length=0.05):
    """Return a straight horizontal chain at rest, pinned at node 0.

    Parameters
    ----------
    n : int
        Number of nodes.
    rest_length : float
        Spacing of the nodes [m] (use the same value in :func:`simulate` for an unstretched
        start).

    Returns
    -------
    positions, velocities : numpy.ndarray
        Shape ``(n, 2)`` float64: nodes at ``(i * rest_length, 0)`` and zero velocities.
    pinned : numpy.ndarray
        Shape ``(n,)`` int8, 1 for node 0 and 0 elsewhere.
    """
    positions = np.zeros((n, 2))
    positions[:, 0] = np.arange(n) * rest_length
    velocities = np.zeros((n, 2))
    pinned = np.zeros(n, dtype=np.int8)
    pinned[0] = 1
    return positions, velocities, pinned


def simulate(positions, velocities, pinned, n_steps=1000, k=1000.0, c=0.1, rest_length=0.05,
             mass=0.01, gravity=9.81, dt=2.0e-4, threads_per_block=THREADS_PER_BLOCK):
    """Return node positions and velocities after ``n_steps`` symplectic Euler steps.

    Parameters
    ----------
    positions : numpy.ndarray
        Initial positions, shape ``(n, 2)`` [m]; never modified. Neighbouring nodes must not
        coincide (the spring direction would be undefined).
    velocities : numpy.ndarray
        Initial velocities, shape ``(n, 2)`` [m/s]; never modified.
    pinned : numpy.ndarray
        Shape ``(n,)`` integers; nodes with a nonzero flag keep their position and have zero
        velocity.
    n_steps : int
        Number of time steps.
    k : float
        Spring stiffness [N/m].
    c : float
        Dashpot damping coefficient along each spring [N s/m].
    rest_length : float
        Rest length of every spring [m].
    mass : float
        Mass of every node [kg].
    gravity : float
        Gravitational acceleration along ``-y`` [m/s^2].
    dt : float
        Time step [s] (defaults: ``dt * 2 sqrt(k/mass) = 0.13``).
    threads_per_block : int
        CUDA block size.

    Returns
    -------
    positions, velocities : numpy.ndarray
        Shape ``(n, 2)`` each, at ``t = n_steps dt``.
    """
    n = positions.shape[0]
    blocks = (n + threads_per_block - 1) // threads_per_block
    pos = cuda.to_device(positions)
    vel = cuda.to_device(velocities)
    pin = cuda.to_device(pinned)
    pos_new = cuda.device_array_like(pos)
    vel_new = cuda.device_array_like(vel)
    for _ in range(n_steps):
        step[blocks, threads_per_block](pos, vel, pos_new, vel_new, pin, k, c, rest_length,
                                        mass, gravity, dt)
        pos, pos_new = pos_new, pos
        vel, vel_new = vel_new, vel
    return pos.copy_to_host(), vel.copy_to_host()
