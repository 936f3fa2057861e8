"""
2-D damped wave: sensitivity to wave speed and damping
======================================================

A Gaussian bump at rest in the middle of a clamped square membrane spreads as a damped wave.
One run of the simulation with two tangent lanes gives the derivative of the final
displacement of every cell with respect to the wave speed ``c`` and the damping rate.
"""

# %%
# The kernel
# ----------
# A leapfrog step of ``u_tt = c² (u_xx + u_yy) - damping u_t`` on a 2-D grid, one thread per
# cell, edges clamped at zero: a numba.cuda kernel ported by its import line.
import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda


@cuda.jit
def leapfrog(u_prev, u, u_next, courant2, g):
    i, j = cuda.grid(2)
    nx, ny = u.shape
    if i >= nx or j >= ny:
        return
    if i == 0 or j == 0 or i == nx - 1 or j == ny - 1:
        u_next[i, j] = 0.0
    else:
        lap = (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1] - 4.0 * u[i, j])
        u_next[i, j] = (2.0 * u[i, j] - (1.0 - g) * u_prev[i, j] + courant2 * lap) / (1.0 + g)


def simulate(u0, c, damping, *, n_steps=40, dx=1.0 / 24, dt=0.3 / 24):
    """The membrane at rest at t = 0 (u(-dt) = u(0)); returns u(T)."""
    courant2 = (c * dt / dx) ** 2  # stable below 1/2
    g = 0.5 * damping * dt
    u_prev = cuda.to_device(u0)
    u = cuda.to_device(u0)
    u_next = cuda.device_array_like(u)
    threads = (8, 8)
    blocks = ((u0.shape[0] + 7) // 8, (u0.shape[1] + 7) // 8)
    for _ in range(n_steps):
        leapfrog[blocks, threads](u_prev, u, u_next, courant2, g)
        u_prev, u, u_next = u, u_next, u_prev
    return u.copy_to_host()


x = np.linspace(0.0, 1.0, 25)
xx, yy = np.meshgrid(x, x, indexing="ij")
u0 = 0.01 * np.exp(-((xx - 0.5) ** 2 + (yy - 0.5) ** 2) / 0.1**2)  # [m]
c, damping = 1.0, 0.5  # [m/s], [1/s]

# %%
# Both derivatives in one run
# ---------------------------
du_dc, du_dg = dualgpu.jacobian(simulate, u0, c, damping, argnums=(1, 2))
u = simulate(u0, c, damping)
print("shapes:", u.shape, du_dc.shape, du_dg.shape)



def centre(c, damping):
    """The displacement of the centre cell: checked against central finite differences."""
    return simulate(u0, c, damping)[12, 12]


dualgpu.testing.check_jacobian(centre, c, damping, argnums=(0, 1))

# %%
# The displacement at the final time.
extent = (0.0, 1.0, 0.0, 1.0)
fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
plot.sensitivity_field(u.T, ax=ax, extent=extent, xlabel="x [m]", ylabel="y [m]",
                       colorbar_label="u(T) [m]", title="Displacement at the final time")

# %%
# Where the displacement depends on the wave speed: a faster wave has travelled further, so
# the derivative is positive ahead of the ring and negative behind it.
fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
plot.sensitivity_field(du_dc.T, ax=ax, extent=extent, xlabel="x [m]", ylabel="y [m]",
                       colorbar_label="∂u/∂c [s]", title="∂u(T)/∂c")

# %%
# Where it depends on the damping: more damping, a smaller wave everywhere it has reached.
fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
plot.sensitivity_field(du_dg.T, ax=ax, extent=extent, xlabel="x [m]", ylabel="y [m]",
                       colorbar_label="∂u/∂damping [m s]", title="∂u(T)/∂damping")
