"""
Heat rod: sensitivity to diffusivity, end temperatures and initial state
========================================================================

A 1-D rod diffuses a hot spot while its ends are held at fixed temperatures. One run with
three tangent lanes gives the derivative of every cell's final temperature with respect to
the diffusivity and the two end temperatures; :func:`dualgpu.jacobian` gives the Jacobian
of the final field with respect to the initial one.
"""

# %%
# The kernel
# ----------
# An ordinary numba.cuda kernel: one explicit (FTCS) step of ``du/dt = alpha d2u/dx2``,
# one thread per cell. The only change for dualgpu is the import line.
import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda

print("backend:", dualgpu.backend())  # cuda on a GPU; DUALGPU_BACKEND=cpu picks the CPU


@cuda.jit
def step(u, u_new, r, left, right):
    i = cuda.grid(1)
    n = u.shape[0]
    if i == 0:
        u_new[i] = left
    elif i == n - 1:
        u_new[i] = right
    elif i < n:
        u_new[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])


def simulate(u0, alpha, left, right, *, n_steps=200, dx=1.0 / 40, dt=1.0e-4):
    """Host code, unchanged by the port: copy in, launch once per step, copy out."""
    r = alpha * dt / dx**2  # stable for r <= 1/2
    u = cuda.to_device(u0)
    u_new = cuda.device_array_like(u)
    threads = 64
    blocks = (u0.size + threads - 1) // threads
    for _ in range(n_steps):
        step[blocks, threads](u, u_new, r, left, right)
        u, u_new = u_new, u
    return u.copy_to_host()


x = np.linspace(0.0, 1.0, 41)  # 41 cells, dx = 1/40 m
u0 = np.exp(-(((x - 0.5) / 0.1) ** 2))  # a hot spot [K]
alpha, left, right = 1.0, 0.5, 0.25  # diffusivity [m²/s], end temperatures [K]
T = 200 * 1.0e-4  # final time [s]

# %%
# Derivatives with respect to the parameters
# -------------------------------------------
# ``argnums=(1, 2, 3)`` differentiates with respect to ``alpha``, ``left`` and ``right``:
# one run of the simulation with three lanes. Each result has the output's shape.
d_alpha, d_left, d_right = dualgpu.jacobian(simulate, u0, alpha, left, right,
                                            argnums=(1, 2, 3))
dualgpu.testing.check_jacobian(simulate, u0, alpha, left, right, argnums=(1, 2, 3))
print("d mean(u) / d alpha, left, right:",
      [round(float(np.mean(d)), 4) for d in (d_alpha, d_left, d_right)])

# %%
# Where each parameter matters: the derivative of the final temperature at each position.
# The end temperatures act near their own end; the diffusivity flattens the hot spot.
fig, axes = plt.subplots(3, 1, figsize=(7.5, 7), layout="constrained")
for ax, d, name, unit in zip(axes, (d_alpha, d_left, d_right),
                             ("alpha", "left", "right"), ("K/(m²/s)", "K/K", "K/K")):
    plot.sensitivity_field(d, ax=ax, extent=(0.0, 1.0), xlabel="position x [m]",
                           colorbar_label=f"∂u/∂{name} [{unit}]",
                           title=f"∂u(x, T)/∂{name}")

# %%
# The Jacobian with respect to the initial state
# ----------------------------------------------
# 41 input directions: the driver runs the simulation in chunks of lanes.
J = dualgpu.jacobian(simulate, u0, alpha, left, right)  # argnums=0: u0
fig, ax = plt.subplots(figsize=(7.5, 6), layout="constrained")
plot.jacobian_heatmap(J, ax=ax, output_name="u(T)", input_name="u(0)",
                      colorbar_label="∂u_i(T) / ∂u_j(0)  [K/K]",
                      title=f"Final temperature w.r.t. the initial one (T = {T:g} s)")
ax.set_xlabel("initial-state cell j")
ax.set_ylabel("final-state cell i")

# %%
# The band along the diagonal is diffusion: each final temperature is a weighted average of
# the initial ones within about a diffusion length, √(2 alpha T) = 0.2 m (8 cells). The end
# rows are zero: the ends are held at ``left`` and ``right`` whatever the initial state.
