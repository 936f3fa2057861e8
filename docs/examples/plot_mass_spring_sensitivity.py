"""
Falling chain: sensitivity of every node to stiffness, damping and mass
=======================================================================

A horizontal chain of point masses joined by damped springs is pinned at its left end and
swings down under gravity. One run with four tangent lanes gives the derivative of every node's
final position with respect to the spring stiffness ``k``, the dashpot damping ``c``, the
node mass and gravity.
"""

# %%
# The kernel
# ----------
# One symplectic Euler step per node; the spring force is a device function. Nothing in
# it knows about derivatives.
import math

import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda


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


def final_positions(k, c, mass, gravity, *, nodes=12, rest=0.05, n_steps=1500, dt=4e-4):
    pos0 = np.zeros((nodes, 2))
    pos0[:, 0] = rest * np.arange(nodes)  # straight and horizontal, at rest
    pos, vel = cuda.to_device(pos0), cuda.to_device(np.zeros((nodes, 2)))
    pos_new, vel_new = cuda.device_array_like(pos), cuda.device_array_like(vel)
    for _ in range(n_steps):
        step[1, 32](pos, vel, pos_new, vel_new, k, c, rest, mass, gravity, dt)
        pos, pos_new, vel, vel_new = pos_new, pos, vel_new, vel
    return pos.copy_to_host()


params = {"k": 1000.0, "c": 0.1, "mass": 0.01, "gravity": 9.81}
units = {"k": "N/m", "c": "N s/m", "mass": "kg", "gravity": "m/s²"}

# %%
# Four parameters, four lanes, one run
# ------------------------------------
pos = final_positions(**params)
derivatives = dualgpu.jacobian(final_positions, *params.values(), argnums=(0, 1, 2, 3))
print("∂(tip height)/∂p:",
      {name: float(d[-1, 1]) for name, d in zip(params, derivatives)})

# %%
# The chain at the end of the run, with arrows ``m ∂x/∂m`` for each node: where it would
# move, to first order, if every node were twice as heavy (the derivative times the mass).
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
ax.plot([0, 0.55], [0, 0], ":", color="grey", label="start (at rest)")
ax.plot(pos[:, 0], pos[:, 1], "o-", color="black", label="after 0.6 s")
shift = params["mass"] * derivatives[2]
ax.quiver(pos[:, 0], pos[:, 1], shift[:, 0], shift[:, 1], angles="xy", scale_units="xy",
          scale=1, color="tab:red", width=0.004, label="m ∂x/∂m: first-order move for 2× mass")
ax.set_aspect("equal")
ax.set_ylim(-0.3, 0.05)
ax.set_xlabel("x [m]")
ax.set_ylabel("y [m]")
ax.set_title("Swinging chain, pinned at (0, 0), and its sensitivity to the node mass")
fig.legend(loc="outside lower center", ncols=3)

# %%
# Which parameter moves the tip most: the elasticity ``p/y ∂y/∂p`` compares parameters of
# different units (the percent change of the tip height per percent change of ``p``).
tip = pos[-1, 1]
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
plot.parameter_ranking([f"{name} = {value:g} {units[name]}" for name, value in params.items()],
                       [d[-1, 1] for d in derivatives], ax=ax,
                       relative=np.array(list(params.values())), output_value=tip,
                       output_name="tip height", title="What sets the height of the tip")
