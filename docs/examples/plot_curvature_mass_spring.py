"""
Second derivatives: the curvature of a swinging chain's energy
==============================================================

A chain pinned at its left end swings down under gravity. Its mechanical energy at the end of
the run depends on the spring stiffness ``k`` and the damping ``c``. :func:`dualgpu.hessian`
(forward over forward: nested duals) gives the 2 × 2 Hessian of that energy, and the
quadratic model it makes is compared with the simulation itself.
"""

# %%
# The simulation
# --------------
# One kernel steps the chain (symplectic Euler), another gives each node's share of the
# energy, summed on the host. (Host numpy works on first-order duals; for second order,
# compute in kernels and use ``.sum()`` as here: the error message says so.)
import math

import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda  # was: from numba import cuda


@cuda.jit(device=True)
def spring_force(xa, ya, vxa, vya, xb, yb, vxb, vyb, k, c, rest):
    dx, dy = xb - xa, yb - ya
    length = math.sqrt(dx * dx + dy * dy)
    ex, ey = dx / length, dy / length
    f = k * (length - rest) + c * ((vxb - vxa) * ex + (vyb - vya) * ey)
    return f * ex, f * ey


@cuda.jit
def step(pos, vel, pos_new, vel_new, k, c, rest, mass, gravity, dt):
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    x, y, vx, vy = pos[i, 0], pos[i, 1], vel[i, 0], vel[i, 1]
    fx, fy = 0.0, -mass * gravity
    if i == 0:  # pinned
        fx, fy, vx, vy = 0.0, 0.0, 0.0, 0.0
    else:
        sx, sy = spring_force(x, y, vx, vy, pos[i - 1, 0], pos[i - 1, 1],
                              vel[i - 1, 0], vel[i - 1, 1], k, c, rest)
        fx, fy = fx + sx, fy + sy
        if i < n - 1:
            sx, sy = spring_force(x, y, vx, vy, pos[i + 1, 0], pos[i + 1, 1],
                                  vel[i + 1, 0], vel[i + 1, 1], k, c, rest)
            fx, fy = fx + sx, fy + sy
    vx, vy = vx + dt * fx / mass, vy + dt * fy / mass
    vel_new[i, 0], vel_new[i, 1] = vx, vy
    pos_new[i, 0], pos_new[i, 1] = x + dt * vx, y + dt * vy


@cuda.jit
def node_energy(pos, vel, k, rest, mass, gravity, out):
    i = cuda.grid(1)
    n = pos.shape[0]
    if i >= n:
        return
    e = 0.5 * mass * (vel[i, 0] ** 2 + vel[i, 1] ** 2) + mass * gravity * pos[i, 1]
    if i < n - 1:  # the spring to the next node
        dx, dy = pos[i + 1, 0] - pos[i, 0], pos[i + 1, 1] - pos[i, 1]
        e += 0.5 * k * (math.sqrt(dx * dx + dy * dy) - rest) ** 2
    out[i] = e


def final_energy(p, *, nodes=8, rest=0.05, mass=0.01, gravity=9.81, n_steps=300, dt=2e-4):
    """E(T) [J]: kinetic + gravitational + elastic energy after the run, of p = (k, c)."""
    k, c = p[0], p[1]
    pos0 = np.zeros((nodes, 2))
    pos0[:, 0] = rest * np.arange(nodes)
    pos, vel = cuda.to_device(pos0), cuda.to_device(np.zeros((nodes, 2)))
    pos_new, vel_new = cuda.device_array_like(pos), cuda.device_array_like(vel)
    for _ in range(n_steps):
        step[1, 32](pos, vel, pos_new, vel_new, k, c, rest, mass, gravity, dt)
        pos, pos_new, vel, vel_new = pos_new, pos, vel_new, vel
    out = cuda.device_array(nodes)
    node_energy[1, 32](pos, vel, k, rest, mass, gravity, out)
    return out.copy_to_host().sum()


p0 = np.array([1000.0, 0.1])  # k [N/m], c [N s/m]

# %%
# Gradient and Hessian
# --------------------
E0 = float(final_energy(p0))
gradient = dualgpu.jacobian(final_energy, p0)
H = dualgpu.hessian(final_energy, p0)
print(f"E(T) = {E0:.6g} J\ngradient = {gradient}\nHessian =\n{H}")
assert np.allclose(H, H.T)  # second derivatives commute

# check: the Hessian is the derivative of the gradient (central differences of it)
steps = 1e-4 * p0
fd = np.stack([(dualgpu.jacobian(final_energy, p0 + h * e)
                - dualgpu.jacobian(final_energy, p0 - h * e)) / (2 * h)
               for h, e in zip(steps, np.eye(2))], axis=1)
assert np.allclose(H, fd, rtol=1e-4, atol=1e-14), fd

# %%
# The quadratic model against the simulation
# ------------------------------------------
# Along each parameter, ±30 % around the nominal values: the simulation (dots), the linear
# model from the gradient and the quadratic one from the Hessian.
fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for i, (ax, name, unit) in enumerate(zip(axes, ("k", "c"), ("N/m", "N s/m"))):
    values = p0[i] * np.linspace(0.7, 1.3, 5)
    fine = np.linspace(values[0], values[-1], 50)
    d = fine - p0[i]
    simulated = [float(final_energy(np.where(np.arange(2) == i, v, p0))) for v in values]
    ax.plot(values, simulated, "o", color="black", label="simulation")
    ax.plot(fine, E0 + gradient[i] * d, color="tab:blue", label="linear model")
    ax.plot(fine, E0 + gradient[i] * d + 0.5 * H[i, i] * d**2, "--", color="tab:red",
            label="quadratic model")
    ax.set_xlabel(f"{name} [{unit}]")
    ax.set_ylabel("E(T) [J]")
    ax.set_title(f"along {name}, the other parameter nominal")
    ax.legend()
fig.suptitle("First- and second-order models of the chain's final energy")
