"""NumPy peer: Jacobians by central finite differences, batched over directions.

Column j of the Jacobian is ``(f(x + h e_j) - f(x - h e_j)) / (2 h)``. The
forward functions of :mod:`benchmarks.peers.problems` take leading batch
dimensions, so ``batch`` directions (2 * batch evaluations) run in one
vectorised call; ``batch`` is chosen per problem to keep memory modest.

Every ``prepare_<case>(...)`` returns a zero-argument callable that computes
the result as a NumPy array; NumPy has no compile step, so its first call
costs the same as the others. ``<case>(...)`` is ``prepare_<case>(...)()``.
"""
import numpy as np

from . import problems
from ._cases import case_api

__all__ = [
    "AVAILABLE", "VERSION", "IMPORT_ERROR", "NAME", "CASES", "prepare", "central_jacobian",
    "heat_jacobian", "heat_jvp", "nbody_mass_jacobian", "pendulum_param_jacobian",
    "prepare_heat_jacobian", "prepare_heat_jvp", "prepare_nbody_mass_jacobian",
    "prepare_pendulum_param_jacobian",
]

AVAILABLE = True
VERSION = np.__version__
IMPORT_ERROR = None
NAME = "numpy-fd"

#: Finite-difference steps. The heat map is linear, so any step is exact up to
#: rounding and a large one minimises it. The others are near the optimum
#: eps**(1/3) times the scale of the input (masses are about 1 / nb).
HEAT_STEP = 1e-2
NBODY_RELATIVE_STEP = 1e-5          # times the mean mass
PENDULUM_STEP = 1e-5

#: Directions evaluated per vectorised call (each makes two evaluations).
HEAT_BATCH = 1000                   # 2000 x n doubles: 16 MB at n = 1000
NBODY_BATCH = 4                     # 8 x nb x nb x 3 doubles: 200 MB at nb = 1024
PENDULUM_BATCH = 3


def central_jacobian(f, x, h, batch):
    """Return the (f(x).size, x.size) central-difference Jacobian of f at x.

    Parameters
    ----------
    f : callable
        Maps an array of shape (B, *x.shape) to one of shape (B, *out_shape).
    x : ndarray
        Point of evaluation (float64).
    h : float
        Step along each unit direction.
    batch : int
        Number of directions per call of f (f sees 2 * batch inputs).
    """
    x = np.asarray(x, dtype=np.float64)
    if not h > 0:
        raise ValueError(f"central_jacobian: step h must be positive; got {h!r}.")
    if int(batch) != batch or batch < 1:
        raise ValueError(f"central_jacobian: batch must be a positive integer; got {batch!r}.")
    flat = x.reshape(-1)
    size = flat.size
    columns = []
    for start in range(0, size, batch):
        idx = np.arange(start, min(start + batch, size))
        points = np.tile(flat, (2 * idx.size, 1))
        points[np.arange(idx.size), idx] += h
        points[idx.size + np.arange(idx.size), idx] -= h
        out = np.asarray(f(points.reshape((2 * idx.size,) + x.shape)))
        out = out.reshape(2 * idx.size, -1)
        columns.append((out[:idx.size] - out[idx.size:]) / (2.0 * h))
    return np.concatenate(columns, axis=0).T


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------

def prepare_heat_jacobian(u0, r, steps, batch=HEAT_BATCH):
    """Return a callable giving the (n, n) heat Jacobian w.r.t. u0 by central differences."""
    def run():
        return central_jacobian(lambda u: problems.heat_forward(u, r, steps), u0, HEAT_STEP, batch)
    return run


def prepare_heat_jvp(u0, r, steps, v):
    """Return a callable giving J @ v (n,) for the heat problem, one central difference along v."""
    u0 = np.asarray(u0, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)

    def run():
        both = problems.heat_forward(np.stack([u0 + HEAT_STEP * v, u0 - HEAT_STEP * v]), r, steps)
        return (both[0] - both[1]) / (2.0 * HEAT_STEP)
    return run


def prepare_nbody_mass_jacobian(pos, vel, masses, G, eps, dt, steps, batch=NBODY_BATCH):
    """Return a callable giving the (nb * 3, nb) Jacobian of final positions w.r.t. masses."""
    h = NBODY_RELATIVE_STEP * float(np.mean(masses))

    def forward(m):
        return problems.nbody_forward(pos, vel, m, G, eps, dt, steps)

    def run():
        return central_jacobian(forward, masses, h, batch)
    return run


def prepare_pendulum_param_jacobian(theta0, omega0, params, dt, steps, batch=PENDULUM_BATCH):
    """Return a callable giving the (M, 3) Jacobian of final theta w.r.t. (gamma, A, omega)."""
    def forward(p):
        return problems.pendulum_forward(theta0, omega0, p, dt, steps)

    def run():
        return central_jacobian(forward, params, PENDULUM_STEP, batch)
    return run


#: case name -> prepare function; ``prepare(case, **problem)``; one-call functions per case
CASES, prepare, _ONE_CALL = case_api("numpy_fd", globals())
heat_jacobian = _ONE_CALL["heat_jacobian"]
heat_jvp = _ONE_CALL["heat_jvp"]
nbody_mass_jacobian = _ONE_CALL["nbody_mass_jacobian"]
pendulum_param_jacobian = _ONE_CALL["pendulum_param_jacobian"]
