"""
N-body gravity: how every mass moves every body
===============================================

16 bodies attract each other with softened gravity (a pair loop per body, one thread per
body, leapfrog steps). The Jacobian of the final positions with respect to the 16 masses
says which mass pulls which body where; the gravitational constant and the softening length
are two more lanes.
"""

# %%
# The kernels
# -----------
# An all-pairs acceleration kernel with a device function per pair, and the two halves of
# the kick-drift-kick leapfrog step.
import math

import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda


@cuda.jit(device=True)
def pair_acceleration(xi, yi, zi, xj, yj, zj, mj, g, eps2):
    dx, dy, dz = xj - xi, yj - yi, zj - zi
    r2 = dx * dx + dy * dy + dz * dz + eps2
    s = g * mj / (r2 * math.sqrt(r2))
    return s * dx, s * dy, s * dz


@cuda.jit
def accelerations(pos, mass, g, eps, acc):
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    ax, ay, az = 0.0, 0.0, 0.0
    for j in range(n):
        if j != i:
            dax, day, daz = pair_acceleration(pos[i, 0], pos[i, 1], pos[i, 2], pos[j, 0],
                                              pos[j, 1], pos[j, 2], mass[j], g, eps * eps)
            ax, ay, az = ax + dax, ay + day, az + daz
    acc[i, 0], acc[i, 1], acc[i, 2] = ax, ay, az


@cuda.jit
def kick_drift(pos, vel, acc, dt):
    i = cuda.grid(1)
    if i < pos.shape[0]:
        for d in range(3):
            vel[i, d] += 0.5 * dt * acc[i, d]
            pos[i, d] += dt * vel[i, d]


@cuda.jit
def kick(vel, acc, dt):
    i = cuda.grid(1)
    if i < vel.shape[0]:
        for d in range(3):
            vel[i, d] += 0.5 * dt * acc[i, d]


def final_positions(pos0, vel0, masses, G, eps, *, n_steps=50, dt=2e-3):
    pos, vel = cuda.to_device(pos0), cuda.to_device(vel0)
    mass = cuda.to_device(masses)
    acc = cuda.device_array_like(pos)
    accelerations[1, 32](pos, mass, G, eps, acc)
    for _ in range(n_steps):
        kick_drift[1, 32](pos, vel, acc, dt)
        accelerations[1, 32](pos, mass, G, eps, acc)
        kick[1, 32](vel, acc, dt)
    return pos.copy_to_host()


n = 16
rng = np.random.default_rng(0)
direction = rng.normal(size=(n, 3))
pos0 = direction / np.linalg.norm(direction, axis=1, keepdims=True) * rng.uniform(size=(n, 1))
vel0 = 0.3 * rng.normal(size=(n, 3))
vel0 -= vel0.mean(axis=0)  # no drift of the centre of mass
masses = np.full(n, 1.0 / n)
G, eps = 1.0, 0.05

# %%
# All the derivatives in one call
# -------------------------------
# ``argnums=(2, 3, 4)``: the 16 masses, G and eps, 18 lanes in one run. Each Jacobian has
# the output's shape (16, 3) followed by its input's.
d_masses, d_G, d_eps = dualgpu.jacobian(final_positions, pos0, vel0, masses, G, eps,
                                        argnums=(2, 3, 4))
print("shapes:", d_masses.shape, d_G.shape, d_eps.shape)  # (16, 3, 16) (16, 3) (16, 3)

# %%
# How each mass moves each body's final x position. The diagonal is small: a body's own
# mass does not accelerate it (it acts only through the bodies it pulls). The largest
# entries are pairs that pass close to each other.
fig, ax = plt.subplots(figsize=(7, 6), layout="constrained")
plot.jacobian_heatmap(d_masses[:, 0, :], ax=ax, output_name="x_i(T)", input_name="m_j",
                      colorbar_label="∂x_i(T)/∂m_j  [length/mass]",
                      title="Final x position of body i w.r.t. the mass of body j")
ax.set_xlabel("mass m_j of body j")
ax.set_ylabel("final x position of body i")

# %%
# Both act on every body, by amounts that differ by orders of magnitude between bodies:
# the softening length matters most for bodies that pass close to another.
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
bodies = np.arange(n)
ax.bar(bodies - 0.2, np.linalg.norm(d_G, axis=1), width=0.4, label="|∂r_i(T)/∂G|")
ax.bar(bodies + 0.2, np.linalg.norm(d_eps, axis=1), width=0.4, label="|∂r_i(T)/∂eps|")
ax.set_yscale("log")
ax.set_xlabel("body i")
ax.set_ylabel("size of the derivative of its final position")
ax.set_title("Sensitivity of each body's final position to G and to the softening length")
ax.legend()
