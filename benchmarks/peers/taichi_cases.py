"""Taichi peer: forward-mode ``ti.ad.FwdMode`` Jacobians, one seed direction per pass, float64.

Taichi's forward mode propagates one tangent per run (``FwdMode(loss, param,
seed)`` with a ScalarField loss and parameter), so a Jacobian of n columns is n
runs of the simulation's kernels with dual fields. The kernels are written the
way Taichi's differentiable examples (DiffTaichi) write them: a parallel outer
loop over cells, bodies or members, and fields with a time index so that no
field element is written twice, as Taichi's autodiff requires (its forward
mode accumulates into the dual of a global store: overwriting a field, e.g.
swapping two buffers, gives wrong tangents -- checked in Taichi 1.7.4). They
run on Taichi's CPU backend with its default thread pool (all cores). Taichi
is optional: if it is not installed, ``AVAILABLE`` is False and every case
raises ``RuntimeError`` when prepared.

Every ``prepare_<case>(...)`` allocates fresh fields and returns a
zero-argument callable giving a NumPy array; its first call compiles the
kernels (Taichi's offline cache may make that fast in later processes).
"""
import numpy as np

from ._cases import case_api

try:
    import taichi as ti
except ImportError as exc:   # optional peer: reported by the benchmark, never fatal
    AVAILABLE = False
    VERSION = None
    IMPORT_ERROR = f"{type(exc).__name__}: {exc}"
else:
    AVAILABLE = True
    VERSION = ".".join(map(str, ti.__version__)) if isinstance(ti.__version__, (tuple, list)) \
        else str(ti.__version__)
    IMPORT_ERROR = None

__all__ = [
    "AVAILABLE", "VERSION", "IMPORT_ERROR", "NAME", "CASES", "prepare",
    "heat_jacobian", "heat_jvp", "nbody_mass_jacobian", "pendulum_param_jacobian",
    "prepare_heat_jacobian", "prepare_heat_jvp", "prepare_nbody_mass_jacobian",
    "prepare_pendulum_param_jacobian",
]

NAME = "taichi"
_STARTED = []


def _require():
    if not AVAILABLE:
        raise RuntimeError(
            f"benchmarks.peers.taichi_cases: Taichi is not installed ({IMPORT_ERROR}); "
            "install it with `pip install taichi` or `pip install .[bench]`."
        )
    if not _STARTED:
        ti.init(arch=ti.cpu, default_fp=ti.f64, log_level=ti.WARN)
        _STARTED.append(True)


def _field(shape, dual=True):
    return ti.field(ti.f64, shape=shape, needs_dual=dual)


def _jacobian_columns(loss, param, n, run):
    """Columns d loss / d param[j], j < n: one forward-mode pass of ``run`` per column."""
    columns = []
    for j in range(n):
        seed = [0.0] * n
        seed[j] = 1.0
        with ti.ad.FwdMode(loss=loss, param=param, seed=seed):
            run()
        columns.append(np.concatenate([field.dual.to_numpy().reshape(-1) for field in loss]))
    return np.stack(columns, axis=1)


# ---------------------------------------------------------------------------
# heat
# ---------------------------------------------------------------------------

def _heat(u0, r, steps):
    n = np.shape(u0)[0]
    u = _field((steps + 1, n))
    u_init = _field(n)
    final = _field(n)

    @ti.kernel
    def start():
        for i in range(n):
            u[0, i] = u_init[i]

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            left = 0.0
            right = 0.0
            if i > 0:
                left = u[t, i - 1]
            if i < n - 1:
                right = u[t, i + 1]
            u[t + 1, i] = u[t, i] + r * (left - 2.0 * u[t, i] + right)

    @ti.kernel
    def finish():
        for i in range(n):
            final[i] = u[steps, i]

    u_init.from_numpy(np.asarray(u0, dtype=np.float64))

    def run():
        start()
        for t in range(steps):
            step(t)
        finish()

    return final, u_init, n, run


def prepare_heat_jacobian(u0, r, steps):
    """Return a callable giving the (n, n) heat Jacobian w.r.t. u0: n forward-mode passes."""
    _require()
    final, u_init, n, run = _heat(u0, r, steps)
    return lambda: _jacobian_columns([final], u_init, n, run)


def prepare_heat_jvp(u0, r, steps, v):
    """Return a callable giving J @ v (n,) for the heat problem: two forward-mode passes.

    ``FwdMode`` stores a seed in float32, so v is split into its float32 part and
    the float32 rounding of the rest; the JVP is linear in the seed.
    """
    _require()
    final, u_init, n, run = _heat(u0, r, steps)
    v = np.asarray(v, dtype=np.float64)
    high = v.astype(np.float32)
    low = (v - high).astype(np.float32)

    def jvp():
        total = np.zeros(n)
        for part in (high, low):
            with ti.ad.FwdMode(loss=[final], param=u_init, seed=[float(x) for x in part]):
                run()
            total += final.dual.to_numpy()
        return total
    return jvp


# ---------------------------------------------------------------------------
# N-body
# ---------------------------------------------------------------------------

def prepare_nbody_mass_jacobian(pos, vel, masses, G, eps, dt, steps):
    """Return a callable giving the (nb * 3, nb) Jacobian of final positions w.r.t. masses.

    Kick-drift-kick leapfrog with positions, half-step velocities, velocities and
    accelerations stored per step (``x[s, i]`` ...), one coordinate per field.
    """
    _require()
    nb = np.shape(masses)[0]
    x = [_field((steps + 1, nb)) for _ in range(3)]
    v = [_field((steps + 1, nb)) for _ in range(3)]
    vh = [_field((steps + 1, nb)) for _ in range(3)]
    a = [_field((steps + 1, nb)) for _ in range(3)]
    init = [_field(nb, dual=False) for _ in range(6)]
    final = [_field(nb) for _ in range(3)]
    m = _field(nb)
    eps2 = float(eps) ** 2
    g, h = float(G), float(dt)
    xx, xy, xz = x
    vx, vy, vz = v
    hx, hy, hz = vh
    ax, ay, az = a
    x0, y0, z0, u0, v0, w0 = init
    fx, fy, fz = final

    @ti.kernel
    def start():
        for i in range(nb):
            xx[0, i] = x0[i]
            xy[0, i] = y0[i]
            xz[0, i] = z0[i]
            vx[0, i] = u0[i]
            vy[0, i] = v0[i]
            vz[0, i] = w0[i]

    @ti.kernel
    def accelerations(s: ti.i32):
        for i in range(nb):
            sx, sy, sz = 0.0, 0.0, 0.0
            for j in range(nb):
                dx = xx[s, j] - xx[s, i]
                dy = xy[s, j] - xy[s, i]
                dz = xz[s, j] - xz[s, i]
                r2 = dx * dx + dy * dy + dz * dz + eps2
                c = g * m[j] / (r2 * ti.sqrt(r2))
                sx += c * dx
                sy += c * dy
                sz += c * dz
            ax[s, i] = sx
            ay[s, i] = sy
            az[s, i] = sz

    @ti.kernel
    def kick_drift(s: ti.i32):
        for i in range(nb):
            hx[s, i] = vx[s, i] + 0.5 * h * ax[s, i]
            hy[s, i] = vy[s, i] + 0.5 * h * ay[s, i]
            hz[s, i] = vz[s, i] + 0.5 * h * az[s, i]
            xx[s + 1, i] = xx[s, i] + h * hx[s, i]
            xy[s + 1, i] = xy[s, i] + h * hy[s, i]
            xz[s + 1, i] = xz[s, i] + h * hz[s, i]

    @ti.kernel
    def kick(s: ti.i32):
        for i in range(nb):
            vx[s + 1, i] = hx[s, i] + 0.5 * h * ax[s + 1, i]
            vy[s + 1, i] = hy[s, i] + 0.5 * h * ay[s + 1, i]
            vz[s + 1, i] = hz[s, i] + 0.5 * h * az[s + 1, i]

    @ti.kernel
    def finish():
        for i in range(nb):
            fx[i] = xx[steps, i]
            fy[i] = xy[steps, i]
            fz[i] = xz[steps, i]

    m.from_numpy(np.asarray(masses, dtype=np.float64))
    start_state = np.concatenate([np.asarray(pos, np.float64), np.asarray(vel, np.float64)], 1)
    for k in range(6):
        init[k].from_numpy(np.ascontiguousarray(start_state[:, k]))

    def run():
        start()
        accelerations(0)
        for s in range(steps):
            kick_drift(s)
            accelerations(s + 1)
            kick(s)
        finish()

    def jacobian():
        columns = _jacobian_columns(final, m, nb, run)        # rows: (coordinate, body)
        return columns.reshape(3, nb, nb).transpose(1, 0, 2).reshape(nb * 3, nb)
    return jacobian


# ---------------------------------------------------------------------------
# pendulum ensemble
# ---------------------------------------------------------------------------

def prepare_pendulum_param_jacobian(theta0, omega0, params, dt, steps):
    """Return a callable giving the (M, 3) Jacobian of final theta w.r.t. (gamma, A, omega)."""
    _require()
    m = np.shape(theta0)[0]
    th, om, th_init, om_init = _field(m), _field(m), _field(m), _field(m)
    p = _field(3)
    h = float(dt)

    @ti.func
    def rhs(t, x, w):
        return -ti.sin(x) - p[0] * w + p[1] * ti.cos(p[2] * t)

    @ti.kernel
    def run_all():
        for i in range(m):
            x = th_init[i]
            w = om_init[i]
            for k in range(steps):
                t = k * h
                half = 0.5 * h
                k1t = w
                k1o = rhs(t, x, w)
                k2t = w + half * k1o
                k2o = rhs(t + half, x + half * k1t, w + half * k1o)
                k3t = w + half * k2o
                k3o = rhs(t + half, x + half * k2t, w + half * k2o)
                k4t = w + h * k3o
                k4o = rhs(t + h, x + h * k3t, w + h * k3o)
                x = x + (h / 6.0) * (k1t + 2.0 * k2t + 2.0 * k3t + k4t)
                w = w + (h / 6.0) * (k1o + 2.0 * k2o + 2.0 * k3o + k4o)
            th[i] = x
            om[i] = w

    th_init.from_numpy(np.asarray(theta0, dtype=np.float64))
    om_init.from_numpy(np.asarray(omega0, dtype=np.float64))
    p.from_numpy(np.asarray(params, dtype=np.float64))
    return lambda: _jacobian_columns([th], p, 3, run_all)


#: case name -> prepare function; ``prepare(case, **problem)``; one-call functions per case
CASES, prepare, _ONE_CALL = case_api("taichi_cases", globals())
heat_jacobian = _ONE_CALL["heat_jacobian"]
heat_jvp = _ONE_CALL["heat_jvp"]
nbody_mass_jacobian = _ONE_CALL["nbody_mass_jacobian"]
pendulum_param_jacobian = _ONE_CALL["pendulum_param_jacobian"]
