"""
Calibration: fit pendulum parameters to noisy data, with their uncertainty
==========================================================================

Four damped, driven pendulums are observed with noise. Starting from a guess 20-30 % off,
``scipy.optimize.least_squares`` fits the damping, the drive amplitude and g/L, with the
Jacobian of the residuals from :func:`dualgpu.jacfwd` (one run of the simulation with three
lanes, instead of three extra runs per iteration for finite differences). The Jacobian at
the optimum gives the parameters' covariance, and :func:`dualgpu.propagate` turns it into an
error band on the predicted angles.
"""

# %%
# The model
# ---------
# RK4 steps of each pendulum in a kernel, a second kernel recording the angles at the
# observation times. ``angles(p)`` takes the parameter vector ``p`` and returns the angles,
# shape ``(times, members)``.
import math

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import least_squares

import dualgpu
from dualgpu import cuda, plot  # was: from numba import cuda


@cuda.jit(device=True)
def acceleration(theta, omega, t, damping, amplitude, g_over_l):
    return -g_over_l * math.sin(theta) - damping * omega + amplitude * math.cos(2.0 / 3.0 * t)


@cuda.jit
def advance(theta, omega, t, dt, damping, amplitude, g_over_l):
    i = cuda.grid(1)
    if i >= theta.shape[0]:
        return
    th, om = theta[i], omega[i]
    k1t, k1o = om, acceleration(th, om, t, damping, amplitude, g_over_l)
    k2t = om + 0.5 * dt * k1o
    k2o = acceleration(th + 0.5 * dt * k1t, k2t, t + 0.5 * dt, damping, amplitude, g_over_l)
    k3t = om + 0.5 * dt * k2o
    k3o = acceleration(th + 0.5 * dt * k2t, k3t, t + 0.5 * dt, damping, amplitude, g_over_l)
    k4t = om + dt * k3o
    k4o = acceleration(th + dt * k3t, k4t, t + dt, damping, amplitude, g_over_l)
    theta[i] = th + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
    omega[i] = om + dt / 6.0 * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)


@cuda.jit
def record(history, row, theta):
    i = cuda.grid(1)
    if i < theta.shape[0]:
        history[row, i] = theta[i]


def angles(p, *, steps=300, every=10, dt=0.02, members=4):
    """Every member's angle at steps every, 2 every, ..., steps: shape (steps // every, members)."""
    damping, amplitude, g_over_l = p[0], p[1], p[2]
    theta = cuda.to_device(np.linspace(-1.0, 1.0, members))
    omega = cuda.to_device(np.zeros(members))
    history = cuda.device_array((steps // every, members))
    for step in range(steps):
        advance[1, 32](theta, omega, step * dt, dt, damping, amplitude, g_over_l)
        if (step + 1) % every == 0:
            record[1, 32](history, (step + 1) // every - 1, theta)
    return history.copy_to_host()


names = ["damping [1/s]", "drive amplitude [rad/s²]", "g/L [1/s²]"]
truth = np.array([0.3, 0.8, 1.5])
guess = truth * np.array([1.3, 0.75, 1.2])
noise = 0.05  # [rad]
data = angles(truth) + noise * np.random.default_rng(0).standard_normal(angles(truth).shape)
times = 0.02 * 10 * np.arange(1, 31)  # the observation times [s]

# %%
# The fit
# -------
# ``dualgpu.jacfwd(angles)`` is a function returning the Jacobian ``(times, members, 3)``;
# least_squares wants it as ``(residuals, parameters)``.
jacobian_of_angles = dualgpu.jacfwd(angles)


def residuals(p):
    return (angles(p) - data).ravel()


def jac(p):
    return jacobian_of_angles(p).reshape(-1, 3)


fit = least_squares(residuals, guess, jac=jac)
J = jac(fit.x)
s2 = fit.fun @ fit.fun / (fit.fun.size - 3)  # the noise variance, estimated
cov = s2 * np.linalg.inv(J.T @ J)  # the parameters' covariance
sigma = np.sqrt(np.diag(cov))
for name, t, g, f, s in zip(names, truth, guess, fit.x, sigma):
    print(f"{name:<26} true {t:.3f}  start {g:.3f}  fit {f:.4f} ± {s:.4f}")
print(f"{fit.njev} Jacobians, {fit.nfev} residual evaluations")

# %%
# The data and the fitted model.
fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
fine = angles(fit.x, steps=300, every=1)
for i, colour in enumerate(plt.rcParams["axes.prop_cycle"].by_key()["color"][:4]):
    ax.plot(times, data[:, i], "o", markersize=3, color=colour)
    ax.plot(0.02 * np.arange(1, 301), fine[:, i], color=colour, label=f"member {i}")
ax.set_xlabel("time t [s]")
ax.set_ylabel("angle θ [rad]")
ax.set_title("Observations (dots) and the fitted model (lines)")
ax.legend(ncols=4, fontsize=8)

# %%
# How the fitted parameters are correlated: ``cov / (σ σᵀ)``, on a diverging scale from -1
# to 1 (blue: negatively correlated, red: positively). Strongly correlated parameters are
# hard to tell apart from these data.
correlation = cov / np.outer(sigma, sigma)
fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
plot.jacobian_heatmap(correlation, ax=ax, output_labels=names, input_labels=names,
                      output_name="parameter", input_name="parameter",
                      colorbar_label="correlation", title="Correlation of the fitted parameters")
ax.images[0].set_cmap(plot.DIVERGING_CMAP)
ax.images[0].set_clim(-1.0, 1.0)  # correlations: always the full -1..1 scale

# %%
# The prediction's error band: ``dualgpu.propagate`` gives the variance of every predicted
# angle, ``diag(J Σ Jᵀ)``, from the parameters' covariance Σ.
std = np.sqrt(dualgpu.propagate(lambda p: angles(p, every=1), cov, fit.x, diagonal=True))
t = 0.02 * np.arange(1, 301)
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
for k, alpha in ((2, 0.2), (1, 0.4)):
    ax.fill_between(t, -k * std[:, 0], k * std[:, 0], color=plot.NEGATIVE_COLOR, alpha=alpha,
                    linewidth=0, label=f"± {k} σ of the prediction")
ax.plot(t, angles(truth, every=1)[:, 0] - fine[:, 0], color="black",
        label="truth − fitted model")
ax.axhline(0.0, color="0.5", linewidth=0.8)
ax.set_xlabel("time t [s]")
ax.set_ylabel("θ − θ_fit of member 0 [rad]")
ax.set_title("The fitted model's error, and the band dualgpu.propagate predicts for it")
ax.legend(fontsize=8)
