"""Benchmark problems: deterministic float64 data and NumPy reference simulations.

Three problems, each with a ``*_setup`` function (default parameters and
initial state for a size, returned as a dict of keyword arguments for the
matching forward and Jacobian functions) and a NumPy ``*_forward`` function.
Every forward function accepts leading batch dimensions on the differentiated
input (and broadcasts the rest), so that :mod:`benchmarks.peers.numpy_fd` can
evaluate many finite-difference directions in one call.

heat
    1-D explicit heat equation, 3-point stencil
    ``u_new[i] = u[i] + r * (u[i-1] - 2 u[i] + u[i+1])`` on n cells. Boundary:
    one ghost cell on each side, held at 0 (homogeneous Dirichlet), so every
    one of the n cells is updated. ``r = alpha dt / dx**2 = 0.25``. Output: the
    state after ``steps`` steps, shape (n,). Jacobian with respect to the
    initial state: (n, n), exactly ``heat_step_matrix(n, r) ** steps``.
nbody
    nb bodies in 3-D, all-pairs softened gravity
    ``a_i = G sum_j m_j (x_j - x_i) / (|x_j - x_i|**2 + eps**2) ** 1.5``
    (the j = i term is zero), leapfrog kick-drift-kick. Output: final
    positions (nb, 3). Jacobian with respect to the masses: (nb * 3, nb).
pendulum
    M independent damped driven pendulums
    ``theta'' = -sin(theta) - gamma theta' + A cos(omega t)`` (g / L = 1),
    classical RK4 with time ``t = k dt`` at step k. Shared parameters
    ``params = (gamma, A, omega)``. Output: final theta (M,). Jacobian with
    respect to the three parameters: (M, 3).
"""
import numpy as np

__all__ = [
    "HEAT_SIZE", "NBODY_SIZE", "PENDULUM_SIZE", "PROBLEMS",
    "heat_setup", "heat_tangent", "heat_forward", "heat_step_matrix", "heat_exact_jacobian",
    "nbody_setup", "nbody_accelerations", "nbody_forward",
    "pendulum_setup", "pendulum_forward",
]

#: Benchmark sizes (keyword arguments of the ``*_setup`` functions).
HEAT_SIZE = {"n": 1000, "steps": 100}
NBODY_SIZE = {"nb": 1024, "steps": 10}
PENDULUM_SIZE = {"m": 100_000, "steps": 1000}

SEED = 20240611


def _check_positive_int(name, value):
    if int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)


# ---------------------------------------------------------------------------
# heat 1-D
# ---------------------------------------------------------------------------

def heat_setup(n=HEAT_SIZE["n"], steps=HEAT_SIZE["steps"]):
    """Return ``{"u0", "r", "steps"}``: a smooth initial profile on n cells, r = 0.25.

    ``u0[i] = sin(pi x) + 0.5 sin(3 pi x) + exp(-50 (x - 0.3)**2)`` at cell
    centres ``x = (i + 0.5) / n``.
    """
    n = _check_positive_int("n", n)
    x = (np.arange(n, dtype=np.float64) + 0.5) / n
    u0 = np.sin(np.pi * x) + 0.5 * np.sin(3 * np.pi * x) + np.exp(-50.0 * (x - 0.3) ** 2)
    return {"u0": u0, "r": 0.25, "steps": _check_positive_int("steps", steps)}


def heat_tangent(n=HEAT_SIZE["n"]):
    """Return a deterministic unit-norm direction of shape (n,) for the heat JVP."""
    n = _check_positive_int("n", n)
    x = (np.arange(n, dtype=np.float64) + 0.5) / n
    v = np.cos(7.0 * np.pi * x) + x
    return v / np.linalg.norm(v)


def heat_forward(u0, r, steps):
    """Return the heat state after ``steps`` steps; u0 has shape (..., n)."""
    u = np.array(u0, dtype=np.float64)
    for _ in range(steps):
        left = np.zeros_like(u)
        right = np.zeros_like(u)
        left[..., 1:] = u[..., :-1]
        right[..., :-1] = u[..., 1:]
        u = u + r * (left - 2.0 * u + right)
    return u


def heat_step_matrix(n, r):
    """Return the (n, n) matrix of one heat step: tridiagonal (r, 1 - 2r, r)."""
    n = _check_positive_int("n", n)
    return (np.diag(np.full(n, 1.0 - 2.0 * r)) + np.diag(np.full(n - 1, r), 1)
            + np.diag(np.full(n - 1, r), -1))


def heat_exact_jacobian(n, r, steps):
    """Return the exact Jacobian of :func:`heat_forward` w.r.t. u0: the step matrix to the power
    steps."""
    return np.linalg.matrix_power(heat_step_matrix(n, r), steps)


# ---------------------------------------------------------------------------
# N-body
# ---------------------------------------------------------------------------

def nbody_setup(nb=NBODY_SIZE["nb"], steps=NBODY_SIZE["steps"]):
    """Return ``{"pos", "vel", "masses", "G", "eps", "dt", "steps"}`` for nb bodies.

    Positions are Gaussian with standard deviation 0.5, velocities Gaussian
    with standard deviation 0.1, masses uniform in [0.5, 1.5] / nb (total mass
    about 1), from a fixed seed. G = 1, eps = 0.1, dt = 0.01.
    """
    nb = _check_positive_int("nb", nb)
    rng = np.random.default_rng(SEED)
    pos = 0.5 * rng.standard_normal((nb, 3))
    vel = 0.1 * rng.standard_normal((nb, 3))
    masses = rng.uniform(0.5, 1.5, nb) / nb
    return {"pos": pos, "vel": vel, "masses": masses, "G": 1.0, "eps": 0.1, "dt": 0.01,
            "steps": _check_positive_int("steps", steps)}


def nbody_accelerations(pos, masses, G, eps):
    """Return softened gravitational accelerations (..., nb, 3) for pos (..., nb, 3),
    masses (..., nb)."""
    diff = pos[..., None, :, :] - pos[..., :, None, :]          # [..., i, j] = x_j - x_i
    inv_r3 = (np.sum(diff * diff, axis=-1) + eps * eps) ** -1.5
    weights = masses[..., None, :] * inv_r3                      # m_j / r_ij**3
    return G * np.sum(weights[..., None] * diff, axis=-2)


def nbody_forward(pos, vel, masses, G, eps, dt, steps):
    """Return final positions (..., nb, 3) after ``steps`` kick-drift-kick leapfrog steps.

    ``masses`` may carry leading batch dimensions (..., nb); pos and vel are
    broadcast against them.
    """
    masses = np.asarray(masses, dtype=np.float64)
    batch = masses.shape[:-1]
    x = np.broadcast_to(np.asarray(pos, dtype=np.float64), batch + np.shape(pos)).copy()
    v = np.broadcast_to(np.asarray(vel, dtype=np.float64), batch + np.shape(vel)).copy()
    a = nbody_accelerations(x, masses, G, eps)
    for _ in range(steps):
        v = v + 0.5 * dt * a
        x = x + dt * v
        a = nbody_accelerations(x, masses, G, eps)
        v = v + 0.5 * dt * a
    return x


# ---------------------------------------------------------------------------
# pendulum ensemble
# ---------------------------------------------------------------------------

def pendulum_setup(m=PENDULUM_SIZE["m"], steps=PENDULUM_SIZE["steps"]):
    """Return ``{"theta0", "omega0", "params", "dt", "steps"}`` for m pendulums.

    theta0 is evenly spaced in [-1, 1], omega0 = 0.1 cos(3 theta0),
    params = (gamma, A, omega) = (0.5, 1.2, 2/3), dt = 0.01.
    """
    m = _check_positive_int("m", m)
    theta0 = np.linspace(-1.0, 1.0, m)
    omega0 = 0.1 * np.cos(3.0 * theta0)
    params = np.array([0.5, 1.2, 2.0 / 3.0])
    return {"theta0": theta0, "omega0": omega0, "params": params, "dt": 0.01,
            "steps": _check_positive_int("steps", steps)}


def pendulum_forward(theta0, omega0, params, dt, steps):
    """Return final theta (..., M) after ``steps`` RK4 steps; params (..., 3) broadcast over M."""
    params = np.asarray(params, dtype=np.float64)
    gamma, amp, freq = params[..., 0, None], params[..., 1, None], params[..., 2, None]

    def rhs(t, th, om):
        return om, -np.sin(th) - gamma * om + amp * np.cos(freq * t)

    batch = params.shape[:-1]
    th = np.broadcast_to(np.asarray(theta0, dtype=np.float64), batch + np.shape(theta0)).copy()
    om = np.broadcast_to(np.asarray(omega0, dtype=np.float64), batch + np.shape(omega0)).copy()
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


#: name -> (setup, forward, benchmark size)
PROBLEMS = {
    "heat": (heat_setup, heat_forward, HEAT_SIZE),
    "nbody": (nbody_setup, nbody_forward, NBODY_SIZE),
    "pendulum": (pendulum_setup, pendulum_forward, PENDULUM_SIZE),
}
