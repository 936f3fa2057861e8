"""JAX peer: ``jax.jacfwd`` (and ``jax.jvp``) of ``lax.fori_loop`` simulations, jitted, float64.

Importing this module turns on ``jax_enable_x64`` for the whole process
(JAX's default is float32). If JAX is not installed, ``AVAILABLE`` is False,
``VERSION`` is None, ``IMPORT_ERROR`` says why, and every case raises
``RuntimeError`` when prepared.

Every ``prepare_<case>(...)`` builds a fresh jitted function (so nothing is
cached from an earlier prepare) and moves the inputs to the device; it
returns a zero-argument callable whose first call traces and compiles, and
whose later calls are steady state. Each call blocks until the result is
ready and returns a NumPy array. ``<case>(...)`` is ``prepare_<case>(...)()``.
"""
import numpy as np

from ._cases import case_api

try:
    import jax
    import jax.numpy as jnp
    from jax import lax
except ImportError as exc:   # optional peer: reported by the benchmark, never fatal
    AVAILABLE = False
    VERSION = None
    IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    AVAILABLE = True
    VERSION = jax.__version__
    IMPORT_ERROR = None
    jax.config.update("jax_enable_x64", True)

__all__ = [
    "AVAILABLE", "VERSION", "IMPORT_ERROR", "NAME", "CASES", "prepare",
    "heat_jacobian", "heat_jvp", "nbody_mass_jacobian", "pendulum_param_jacobian",
    "prepare_heat_jacobian", "prepare_heat_jvp", "prepare_nbody_mass_jacobian",
    "prepare_pendulum_param_jacobian",
]

NAME = "jax"


def _require():
    if not AVAILABLE:
        raise RuntimeError(
            f"benchmarks.peers.jax_cases: JAX is not installed ({IMPORT_ERROR}); "
            "install it with `pip install \"jax[cpu]\"` or `pip install .[bench]`."
        )


def _runner(fn, *args):
    def run():
        return np.asarray(fn(*args).block_until_ready())
    return run


def _f64(a):
    return jnp.asarray(np.asarray(a, dtype=np.float64))


# ---------------------------------------------------------------------------
# simulations
# ---------------------------------------------------------------------------

def _heat_step(u, r):
    padded = jnp.pad(u, 1)          # ghost cells held at 0
    return u + r * (padded[:-2] - 2.0 * u + padded[2:])


def _heat_simulation(steps):
    def simulate(u0, r):
        return lax.fori_loop(0, steps, lambda k, u: _heat_step(u, r), u0)
    return simulate


def _nbody_accelerations(x, masses, G, eps):
    diff = x[None, :, :] - x[:, None, :]                     # [i, j] = x_j - x_i
    inv_r3 = (jnp.sum(diff * diff, axis=-1) + eps * eps) ** -1.5
    weights = masses[None, :] * inv_r3
    return G * jnp.sum(weights[..., None] * diff, axis=-2)


def _nbody_simulation(steps):
    def simulate(masses, pos, vel, G, eps, dt):
        def step(k, state):
            x, v, a = state
            v = v + 0.5 * dt * a
            x = x + dt * v
            a = _nbody_accelerations(x, masses, G, eps)
            v = v + 0.5 * dt * a
            return x, v, a
        state = (pos, vel, _nbody_accelerations(pos, masses, G, eps))
        return lax.fori_loop(0, steps, step, state)[0]
    return simulate


def _pendulum_simulation(steps):
    def simulate(params, theta0, omega0, dt):
        gamma, amp, freq = params[0], params[1], params[2]

        def rhs(t, th, om):
            return om, -jnp.sin(th) - gamma * om + amp * jnp.cos(freq * t)

        def step(k, state):
            th, om = state
            t = k * dt
            half = 0.5 * dt
            k1t, k1o = rhs(t, th, om)
            k2t, k2o = rhs(t + half, th + half * k1t, om + half * k1o)
            k3t, k3o = rhs(t + half, th + half * k2t, om + half * k2o)
            k4t, k4o = rhs(t + dt, th + dt * k3t, om + dt * k3o)
            th = th + (dt / 6.0) * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
            om = om + (dt / 6.0) * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
            return th, om
        return lax.fori_loop(0, steps, step, (theta0, omega0))[0]
    return simulate


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

def prepare_heat_jacobian(u0, r, steps):
    """Return a callable giving the (n, n) heat Jacobian w.r.t. u0: jit(jacfwd(fori_loop))."""
    _require()
    fn = jax.jit(jax.jacfwd(_heat_simulation(steps)))
    return _runner(fn, _f64(u0), _f64(r))


def prepare_heat_jvp(u0, r, steps, v):
    """Return a callable giving J @ v (n,) for the heat problem: jit(jvp(fori_loop))."""
    _require()
    simulate = _heat_simulation(steps)

    def tangent(u, rr, direction):
        return jax.jvp(lambda w: simulate(w, rr), (u,), (direction,))[1]
    return _runner(jax.jit(tangent), _f64(u0), _f64(r), _f64(v))


def prepare_nbody_mass_jacobian(pos, vel, masses, G, eps, dt, steps, chunk_size=None):
    """Return a callable giving the (nb * 3, nb) Jacobian of final positions w.r.t. masses.

    With ``chunk_size=None`` this is ``jit(jacfwd(...))`` (all nb directions at
    once); otherwise ``lax.map`` over the unit directions with
    ``batch_size=chunk_size``, vmapped JVPs, to bound memory.
    """
    _require()
    simulate = _nbody_simulation(steps)
    nb = np.shape(masses)[0]

    def jacobian(m, x, v, g, e, h):
        if chunk_size is None:
            jac = jax.jacfwd(simulate)(m, x, v, g, e, h)                 # (nb, 3, nb)
        else:
            def column(direction):
                return jax.jvp(lambda w: simulate(w, x, v, g, e, h), (m,), (direction,))[1]
            cols = lax.map(column, jnp.eye(nb, dtype=m.dtype), batch_size=chunk_size)
            jac = jnp.moveaxis(cols, 0, -1)
        return jac.reshape(nb * 3, nb)
    return _runner(jax.jit(jacobian), _f64(masses), _f64(pos), _f64(vel), _f64(G), _f64(eps),
                   _f64(dt))


def prepare_pendulum_param_jacobian(theta0, omega0, params, dt, steps):
    """Return a callable giving the (M, 3) Jacobian of final theta w.r.t. (gamma, A, omega)."""
    _require()
    fn = jax.jit(jax.jacfwd(_pendulum_simulation(steps)))
    return _runner(fn, _f64(params), _f64(theta0), _f64(omega0), _f64(dt))


#: case name -> prepare function; ``prepare(case, **problem)``; one-call functions per case
CASES, prepare, _ONE_CALL = case_api("jax_cases", globals())
heat_jacobian = _ONE_CALL["heat_jacobian"]
heat_jvp = _ONE_CALL["heat_jvp"]
nbody_mass_jacobian = _ONE_CALL["nbody_mass_jacobian"]
pendulum_param_jacobian = _ONE_CALL["pendulum_param_jacobian"]
