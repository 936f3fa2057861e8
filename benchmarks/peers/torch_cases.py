"""PyTorch peer: ``torch.func.jacfwd`` (and ``torch.func.jvp``) of Python-loop simulations.

float64 on CPU, eager mode, the time loop written in Python as a user would,
run under ``torch.no_grad`` (forward-mode AD does not need the autograd
tape). If PyTorch is not installed, ``AVAILABLE`` is False, ``VERSION`` is
None, ``IMPORT_ERROR`` says why, and every case raises ``RuntimeError`` when
prepared.

Every ``prepare_<case>(...)`` converts the inputs to tensors and returns a
zero-argument callable giving a NumPy array; there is no compile step, so the
first call differs from later ones only by warm-up.
``<case>(...)`` is ``prepare_<case>(...)()``.
"""
import numpy as np

from ._cases import case_api

try:
    import torch
    from torch import func as torch_func
except ImportError as exc:   # optional peer: reported by the benchmark, never fatal
    AVAILABLE = False
    VERSION = None
    IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    AVAILABLE = True
    VERSION = torch.__version__
    IMPORT_ERROR = None

__all__ = [
    "AVAILABLE", "VERSION", "IMPORT_ERROR", "NAME", "CASES", "prepare",
    "NBODY_CHUNK_SIZE", "set_threads",
    "heat_jacobian", "heat_jvp", "nbody_mass_jacobian", "pendulum_param_jacobian",
    "prepare_heat_jacobian", "prepare_heat_jvp", "prepare_nbody_mass_jacobian",
    "prepare_pendulum_param_jacobian",
]

NAME = "torch"

#: jacfwd materialises a (lanes, nb, nb, 3) pair array: 25 GB for nb = 1024
#: and all 1024 lanes. Above this many bodies the Jacobian is taken in chunks
#: of this many directions (vmap of jvp with chunk_size), about 100 MB per lane.
NBODY_CHUNK_SIZE = 32


def set_threads(count):
    """Set PyTorch's intra-op thread count and return the previous one.

    On a busy 2-core machine PyTorch's default (one OpenMP thread per core)
    was measured 14x slower than one thread (heat Jacobian: 7.0 s against
    0.52 s) because the threads wait on each other while other processes hold
    a core; pin it (1 for a shared machine) before timing.
    """
    _require()
    if int(count) != count or count < 1:
        raise ValueError(f"set_threads: count must be a positive integer; got {count!r}.")
    previous = torch.get_num_threads()
    torch.set_num_threads(int(count))
    return previous


def _require():
    if not AVAILABLE:
        raise RuntimeError(
            f"benchmarks.peers.torch_cases: PyTorch is not installed ({IMPORT_ERROR}); "
            "install a CPU build with `pip install torch` (see the `bench` extra)."
        )


def _f64(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


def _runner(fn, *args):
    def run():
        with torch.no_grad():
            return fn(*args).numpy()
    return run


# ---------------------------------------------------------------------------
# simulations
# ---------------------------------------------------------------------------

def _heat_simulation(r, steps):
    def simulate(u):
        for _ in range(steps):
            padded = torch.nn.functional.pad(u, (1, 1))      # ghost cells held at 0
            u = u + r * (padded[:-2] - 2.0 * u + padded[2:])
        return u
    return simulate


def _nbody_accelerations(x, masses, G, eps):
    diff = x[None, :, :] - x[:, None, :]                      # [i, j] = x_j - x_i
    inv_r3 = (torch.sum(diff * diff, dim=-1) + eps * eps) ** -1.5
    weights = masses[None, :] * inv_r3
    return G * torch.sum(weights[..., None] * diff, dim=-2)


def _nbody_simulation(pos, vel, G, eps, dt, steps):
    def simulate(masses):
        x, v = pos, vel
        a = _nbody_accelerations(x, masses, G, eps)
        for _ in range(steps):
            v = v + 0.5 * dt * a
            x = x + dt * v
            a = _nbody_accelerations(x, masses, G, eps)
            v = v + 0.5 * dt * a
        return x
    return simulate


def _pendulum_simulation(theta0, omega0, dt, steps):
    def simulate(params):
        gamma, amp, freq = params[0], params[1], params[2]

        def rhs(t, th, om):
            return om, -torch.sin(th) - gamma * om + amp * torch.cos(freq * t)

        th, om = theta0, omega0
        half = 0.5 * dt
        for k in range(steps):
            t = k * dt
            k1t, k1o = rhs(t, th, om)
            k2t, k2o = rhs(t + half, th + half * k1t, om + half * k1o)
            k3t, k3o = rhs(t + half, th + half * k2t, om + half * k2o)
            k4t, k4o = rhs(t + dt, th + dt * k3t, om + dt * k3o)
            th = th + (dt / 6.0) * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
            om = om + (dt / 6.0) * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
        return th
    return simulate


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

def prepare_heat_jacobian(u0, r, steps):
    """Return a callable giving the (n, n) heat Jacobian w.r.t. u0: torch.func.jacfwd."""
    _require()
    return _runner(torch_func.jacfwd(_heat_simulation(float(r), steps)), _f64(u0))


def prepare_heat_jvp(u0, r, steps, v):
    """Return a callable giving J @ v (n,) for the heat problem: torch.func.jvp."""
    _require()
    simulate = _heat_simulation(float(r), steps)

    def tangent(u, direction):
        return torch_func.jvp(simulate, (u,), (direction,))[1]
    return _runner(tangent, _f64(u0), _f64(v))


def prepare_nbody_mass_jacobian(pos, vel, masses, G, eps, dt, steps, chunk_size="auto"):
    """Return a callable giving the (nb * 3, nb) Jacobian of final positions w.r.t. masses.

    ``chunk_size=None`` uses ``torch.func.jacfwd`` (all nb directions at once);
    an integer uses ``vmap(jvp, chunk_size=chunk_size)`` over the unit
    directions; ``"auto"`` (default) picks jacfwd up to ``NBODY_CHUNK_SIZE``
    bodies and chunks of ``NBODY_CHUNK_SIZE`` above.
    """
    _require()
    nb = np.shape(masses)[0]
    if chunk_size == "auto":
        chunk_size = None if nb <= NBODY_CHUNK_SIZE else NBODY_CHUNK_SIZE
    simulate = _nbody_simulation(_f64(pos), _f64(vel), float(G), float(eps), float(dt), steps)

    def jacobian(m):
        if chunk_size is None:
            jac = torch_func.jacfwd(simulate)(m)                           # (nb, 3, nb)
        else:
            def column(direction):
                return torch_func.jvp(simulate, (m,), (direction,))[1]
            eye = torch.eye(nb, dtype=m.dtype)
            jac = torch_func.vmap(column, chunk_size=chunk_size)(eye).movedim(0, -1)
        return jac.reshape(nb * 3, nb)
    return _runner(jacobian, _f64(masses))


def prepare_pendulum_param_jacobian(theta0, omega0, params, dt, steps):
    """Return a callable giving the (M, 3) Jacobian of final theta w.r.t. (gamma, A, omega)."""
    _require()
    simulate = _pendulum_simulation(_f64(theta0), _f64(omega0), float(dt), steps)
    return _runner(torch_func.jacfwd(simulate), _f64(params))


#: case name -> prepare function; ``prepare(case, **problem)``; one-call functions per case
CASES, prepare, _ONE_CALL = case_api("torch_cases", globals())
heat_jacobian = _ONE_CALL["heat_jacobian"]
heat_jvp = _ONE_CALL["heat_jvp"]
nbody_mass_jacobian = _ONE_CALL["nbody_mass_jacobian"]
pendulum_param_jacobian = _ONE_CALL["pendulum_param_jacobian"]
