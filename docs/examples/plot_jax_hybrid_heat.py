"""
A simulation inside JAX: learn a rod's diffusivity field with a neural network
==============================================================================

A numba.cuda heat simulation with a diffusivity that varies along the rod, ``alpha(x)``,
becomes a JAX function with :func:`dualgpu.interop.to_jax`. The rest is plain JAX: ``alpha``
is a small neural network (an MLP), the loss is the misfit to noisy final temperatures of
three experiments (``jax.vmap`` over them), and ``jax.grad`` with Adam fits the network.
(The ``jax`` extra is needed.)
"""

# %%
# The simulation
# --------------
# A conservative finite-volume step with a diffusivity per cell; ends held at 0 K.
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from jax.example_libraries import optimizers

from dualgpu import cuda  # was: from numba import cuda
from dualgpu.interop import to_jax

jax.config.update("jax_enable_x64", True)


@cuda.jit
def step(u, u_new, alpha, c):
    i = cuda.grid(1)
    n = u.shape[0]
    if i == 0 or i == n - 1:
        u_new[i] = 0.0
    elif i < n:
        a_minus = 0.5 * (alpha[i - 1] + alpha[i])
        a_plus = 0.5 * (alpha[i] + alpha[i + 1])
        u_new[i] = u[i] + c * (a_plus * (u[i + 1] - u[i]) - a_minus * (u[i] - u[i - 1]))


x = np.linspace(0.0, 1.0, 31)
dx = x[1] - x[0]
dt = 0.4 * dx**2 / 1.7  # stable for alpha up to 1.7 m²/s


def simulate(alpha, u0, n_steps=60):
    """Final temperatures after n_steps, for a diffusivity per cell alpha [m²/s]."""
    u, u_new = cuda.to_device(u0), cuda.device_array_like(u0)
    a = cuda.to_device(alpha)
    for _ in range(n_steps):
        step[1, 32](u, u_new, a, dt / dx**2)
        u, u_new = u_new, u
    return u.copy_to_host()


# A JAX function, differentiable in alpha (u0 is data). Under jax.jit and jax.vmap, JAX
# needs the output's shape before anything runs: result_shape_dtypes gives it.
sim = to_jax(simulate, argnums=0,
             result_shape_dtypes=jax.ShapeDtypeStruct(x.shape, jnp.float64))

# %%
# Data and the network
# --------------------
# Three hot spots, observed at the end with noise, for a true diffusivity with a bump and
# a dip. ``alpha(x)`` is an MLP x -> 16 -> 16 -> 1, squashed into [0.3, 1.7] m²/s.
true_alpha = 1.0 + 0.4 * np.sin(2 * np.pi * x) * np.exp(-(((x - 0.4) / 0.35) ** 2))
u0s = np.stack([np.exp(-(((x - c) / 0.08) ** 2)) for c in (0.25, 0.5, 0.75)])
noise = 0.002
observed = np.stack([simulate(true_alpha, u0) for u0 in u0s])
observed += noise * np.random.default_rng(0).standard_normal(observed.shape)

k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
params = {"w1": 3.0 * jax.random.normal(k1, (1, 16)), "b1": jax.random.normal(k3, (16,)),
          "w2": jax.random.normal(k2, (16, 16)) / 4.0, "b2": jnp.zeros(16),
          "w3": jnp.zeros((16, 1)), "b3": jnp.zeros(1)}


def alpha_field(params, x):
    h = jnp.tanh(x[:, None] @ params["w1"] + params["b1"])
    h = jnp.tanh(h @ params["w2"] + params["b2"])
    return 0.3 + 1.4 * jax.nn.sigmoid((h @ params["w3"] + params["b3"])[:, 0])


def loss(params):
    predicted = jax.vmap(sim, in_axes=(None, 0))(alpha_field(params, jnp.asarray(x)),
                                                 jnp.asarray(u0s))
    return jnp.mean((predicted - observed) ** 2) / noise**2


# %%
# The fit
# -------
# Each gradient: one dual run per experiment with one lane per cell (the Jacobian of the
# final temperatures with respect to alpha), then JAX's reverse mode through the network.
value_and_grad = jax.jit(jax.value_and_grad(loss))
init, update, get_params = optimizers.adam(0.02)
state = init(params)
losses = []
for k in range(60):
    value, grad = value_and_grad(get_params(state))
    losses.append(float(value))
    state = update(k, grad, state)
fitted = np.asarray(alpha_field(get_params(state), jnp.asarray(x)))
print(f"loss {losses[0]:.4g} -> {losses[-1]:.4g}")

# %%
# The recovered diffusivity: close to the truth where the hot spots reached, less so near
# the ends, where the temperature hardly changes.
fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
ax.plot(x, true_alpha, "k-", lw=2, label="true α(x)")
ax.plot(x, fitted, "C3--", lw=2, label="recovered (MLP)")
ax.plot(x, np.asarray(alpha_field(params, jnp.asarray(x))), "C0:", label="initial guess")
ax.set_xlabel("position x [m]")
ax.set_ylabel("diffusivity α [m²/s]")
ax.set_title("Diffusivity recovered from noisy final temperatures")
ax.legend()

# %%
# The loss, in units of the noise: 1 is the noise level.
fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
ax.semilogy(np.arange(1, len(losses) + 1), losses)
ax.axhline(1.0, color="0.5", ls=":", label="noise level")
ax.set_xlabel("Adam iteration")
ax.set_ylabel("mean squared misfit / noise²")
ax.set_title("jax.grad through dualgpu.interop.to_jax")
ax.legend()
