"""
Driven pendulums: an ensemble, shared parameters and each member's own Jacobian
===============================================================================

64 damped, driven pendulums start at different angles, one CUDA thread each. We ask two
questions: how the final angle of every pendulum depends on the *shared* parameters (damping
and drive amplitude: one Jacobian column each), and how it depends on the pendulum's *own*
start (one small Jacobian per member, all of them from one run of
:func:`dualgpu.ensemble_jacobian`).
"""

# %%
# The kernel and a device function
# --------------------------------
# RK4 steps of ``theta'' = -(g/l) sin(theta) - damping theta' + A cos(w t)``. Device
# functions (``@cuda.jit(device=True)``) and ``math`` work on duals as they are.
import math

import matplotlib.pyplot as plt
import numpy as np

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda


@cuda.jit(device=True)
def acceleration(theta, omega, t, damping, amplitude):
    return -math.sin(theta) - damping * omega + amplitude * math.cos(2.0 / 3.0 * t)


@cuda.jit
def advance(theta, omega, t, dt, damping, amplitude):
    i = cuda.grid(1)
    if i >= theta.shape[0]:
        return
    th, om = theta[i], omega[i]
    k1t, k1o = om, acceleration(th, om, t, damping, amplitude)
    k2t = om + 0.5 * dt * k1o
    k2o = acceleration(th + 0.5 * dt * k1t, k2t, t + 0.5 * dt, damping, amplitude)
    k3t = om + 0.5 * dt * k2o
    k3o = acceleration(th + 0.5 * dt * k2t, k3t, t + 0.5 * dt, damping, amplitude)
    k4t = om + dt * k3o
    k4o = acceleration(th + dt * k3t, k4t, t + dt, damping, amplitude)
    theta[i] = th + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
    omega[i] = om + dt / 6.0 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)


def final_angles(theta0, omega0, damping, amplitude, *, n_steps=200, dt=0.05):
    theta, omega = cuda.to_device(theta0), cuda.to_device(omega0)
    for n in range(n_steps):
        advance[(theta0.size + 63) // 64, 64](theta, omega, n * dt, dt, damping, amplitude)
    return theta.copy_to_host()


members = 64
theta0 = np.linspace(-2.5, 2.5, members)  # initial angles [rad]
omega0 = np.zeros(members)  # at rest
damping, amplitude = 0.5, 1.2  # [1/s], [rad/s²]

# %%
# Shared parameters: one lane each
# --------------------------------
d_damping, d_amplitude = dualgpu.jacobian(final_angles, theta0, omega0, damping, amplitude,
                                          argnums=(2, 3))
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
ax.plot(theta0, d_damping, label="∂θ(T)/∂damping [rad s]")
ax.plot(theta0, d_amplitude, label="∂θ(T)/∂amplitude [s²]")
ax.set_xlabel("initial angle θ(0) [rad]")
ax.set_ylabel("derivative of the final angle")
ax.set_title("How each pendulum's final angle (T = 10 s) depends on the shared parameters")
ax.grid(alpha=0.3)
ax.legend()

# %%
# Each member's own Jacobian
# --------------------------
# The members are independent, so ``ensemble_jacobian`` seeds every member's own inputs in
# the same two lanes: one run gives all 64 Jacobians ``∂θ_i(T)/∂(θ_i(0), ω_i(0))``.
own = dualgpu.ensemble_jacobian(final_angles, theta0, omega0, damping, amplitude,
                                argnums=(0, 1))
print("per-member Jacobians:", own.shape)  # (members, 1 output, 2 inputs)

# the same numbers as the diagonal of the full 64 x 64 Jacobian, at 32 times the lanes
full = dualgpu.jacobian(final_angles, theta0, omega0, damping, amplitude)
assert np.allclose(own[:, 0, 0], np.diag(full))

fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
ax.semilogy(theta0, np.abs(own[:, 0, 0]), label="|∂θ(T)/∂θ(0)| [rad/rad]")
ax.semilogy(theta0, np.abs(own[:, 0, 1]), "--", label="|∂θ(T)/∂ω(0)| [s]")
ax.set_xlabel("initial angle θ(0) [rad]")
ax.set_ylabel("growth of an error in the start")
ax.set_title("Each member's sensitivity to its own initial state")
ax.grid(alpha=0.3)
ax.legend()

# %%
# The full Jacobian is diagonal: no pendulum sees another.
fig, ax = plt.subplots(figsize=(6.5, 5.5), layout="constrained")
plot.jacobian_heatmap(full, ax=ax, output_name="θ(T)", input_name="θ(0)",
                      scale="symlog", colorbar_label="∂θ_i(T)/∂θ_j(0) [rad/rad]",
                      title="Full Jacobian: only the diagonal is non-zero")
