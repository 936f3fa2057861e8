"""
Gray-Scott reaction-diffusion: sensitivity to feed and kill rates
=================================================================

Two chemicals react and diffuse on a periodic square: the substrate ``u`` is fed in at rate
``F``, the autocatalyst ``v`` grows on it (``u + 2v -> 3v``) and is removed at rate
``F + k``. From a perturbed square in the middle, patterns grow. One run with two tangent
lanes gives where the final autocatalyst concentration depends on ``F`` and on ``k``.
"""

# %%
# The kernel
# ----------
# One explicit Euler step of both concentrations, one thread per cell, periodic neighbours.
import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda


@cuda.jit
def step(u, v, u_new, v_new, ru, rv, F, k, dt):
    i, j = cuda.grid(2)
    nx, ny = u.shape
    if i >= nx or j >= ny:
        return
    im, ip, jm, jp = (i - 1) % nx, (i + 1) % nx, (j - 1) % ny, (j + 1) % ny
    uc, vc = u[i, j], v[i, j]
    lap_u = u[im, j] + u[ip, j] + u[i, jm] + u[i, jp] - 4.0 * uc
    lap_v = v[im, j] + v[ip, j] + v[i, jm] + v[i, jp] - 4.0 * vc
    uvv = uc * vc * vc
    u_new[i, j] = uc + ru * lap_u + dt * (F * (1.0 - uc) - uvv)
    v_new[i, j] = vc + rv * lap_v + dt * (uvv - (F + k) * vc)


def final_v(u0, v0, F, k, *, n_steps=200, Du=0.16, Dv=0.08, dt=1.0):
    """Host code: ``n_steps`` launches, buffers swapped; returns v(T)."""
    u, v = cuda.to_device(u0), cuda.to_device(v0)
    u_new, v_new = cuda.device_array_like(u), cuda.device_array_like(v)
    threads = (8, 8)
    blocks = ((u0.shape[0] + 7) // 8, (u0.shape[1] + 7) // 8)
    for _ in range(n_steps):
        step[blocks, threads](u, v, u_new, v_new, Du * dt, Dv * dt, F, k, dt)
        u, u_new, v, v_new = u_new, u, v_new, v
    return v.copy_to_host()


n = 24
rng = np.random.default_rng(0)
u0, v0 = np.ones((n, n)), np.zeros((n, n))
u0[9:15, 9:15], v0[9:15, 9:15] = 0.5, 0.25  # the perturbed square
u0 += 0.01 * rng.uniform(-1, 1, (n, n))
v0 += 0.01 * rng.uniform(-1, 1, (n, n))
F, k = 0.035, 0.065

# %%
# The derivatives
# ---------------
dv_dF, dv_dk = dualgpu.jacobian(final_v, u0, v0, F, k, argnums=(2, 3))
v = final_v(u0, v0, F, k)
print(f"mean v(T) = {v.mean():.5f};  d mean / dF = {dv_dF.mean():.4f},"
      f"  d mean / dk = {dv_dk.mean():.4f}")

# %%
# The autocatalyst after 200 steps.
extent = (0, n, 0, n)
fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
plot.sensitivity_field(v.T, ax=ax, extent=extent, xlabel="x [cells]", ylabel="y [cells]",
                       colorbar_label="v(T)", title="Autocatalyst concentration v at T = 200")

# %%
# A higher feed rate: more autocatalyst at the growing front.
fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
plot.sensitivity_field(dv_dF.T, ax=ax, extent=extent, xlabel="x [cells]", ylabel="y [cells]",
                       colorbar_label="∂v/∂F [time]", title="∂v(T)/∂F")

# %%
# A higher kill rate: less of it, most where it is most concentrated.
fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
plot.sensitivity_field(dv_dk.T, ax=ax, extent=extent, xlabel="x [cells]", ylabel="y [cells]",
                       colorbar_label="∂v/∂k [time]", title="∂v(T)/∂k")
