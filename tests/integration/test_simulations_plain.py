"""The example simulations (``simulations/``) as plain numba.cuda code, without dual numbers.

How they are run here
---------------------
The modules were written with ``from numba import cuda`` and are ported with the one line
``from dualgpu import cuda``; they decorate their kernels at import time, the way simulation
authors write them. To run those kernels on a
machine without a GPU, every case in ``CASES`` is run by the CUDA simulator in ONE
subprocess started with ``NUMBA_ENABLE_CUDASIM=1`` (``simulator_results`` below); this needs
no change to the modules and no patching of numba's internals. The results come back by
pickle and are compared here with independent NumPy implementations of the same schemes
(``reference_*``) to 1e-12 relative, and checked for physical invariants.

``test_kernels_compile_to_ptx`` compiles every kernel as the GPU backend prepares it
(``dualgpu.backends.gpu.kernel.prepare_function``) for sm_90 offline (the ``offline_ptx`` fixture),
which the simulator cannot check (numba typing). ``test_on_gpu`` runs the same cases on a real GPU
in-process when one is present, and is skipped otherwise.
"""
import ast
import importlib
import inspect
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MODULES = ["heat1d", "heat2d", "wave2d", "nbody", "mass_spring", "pendulums", "gray_scott"]
RTOL = 1e-12

# `simulations/` is not an installed package: plain `pytest` (not `python3 -m pytest`) needs this.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# --------------------------------------------------------------------------------------------
# NumPy reference implementations (same schemes, written independently, vectorised)
# --------------------------------------------------------------------------------------------

def reference_heat1d(u0, n_steps, alpha, dt, dx, left=0.0, right=0.0, periodic=False, **_):
    u = u0.copy()
    r = alpha * dt / dx ** 2
    for _ in range(n_steps):
        if periodic:
            u = u + r * (np.roll(u, 1) - 2.0 * u + np.roll(u, -1))
        else:
            new = np.empty_like(u)
            new[1:-1] = u[1:-1] + r * (u[:-2] - 2.0 * u[1:-1] + u[2:])
            new[0] = left
            new[-1] = right
            u = new
    return u


def _edges(a, value):
    a[0, :] = value
    a[-1, :] = value
    a[:, 0] = value
    a[:, -1] = value
    return a


def _lap_x(u):
    return u[:-2, 1:-1] - 2.0 * u[1:-1, 1:-1] + u[2:, 1:-1]


def _lap_y(u):
    return u[1:-1, :-2] - 2.0 * u[1:-1, 1:-1] + u[1:-1, 2:]


def reference_heat2d(u0, n_steps, alpha, dt, dx, dy=None, boundary=0.0, **_):
    dy = dx if dy is None else dy
    rx, ry = alpha * dt / dx ** 2, alpha * dt / dy ** 2
    u = u0.copy()
    for _ in range(n_steps):
        new = np.empty_like(u)
        new[1:-1, 1:-1] = u[1:-1, 1:-1] + rx * _lap_x(u) + ry * _lap_y(u)
        u = _edges(new, boundary)
    return u


def reference_wave2d(u0, v0, n_steps, c, dt, dx, dy=None, damping=0.0, **_):
    dy = dx if dy is None else dy
    cx, cy, g = (c * dt / dx) ** 2, (c * dt / dy) ** 2, 0.5 * damping * dt
    u = u0.copy()
    prev = np.zeros_like(u)
    prev[1:-1, 1:-1] = (u[1:-1, 1:-1] - dt * v0[1:-1, 1:-1] * (1.0 + g)
                        + 0.5 * (cx * _lap_x(u) + cy * _lap_y(u)))
    for _ in range(n_steps):
        new = np.zeros_like(u)
        new[1:-1, 1:-1] = (2.0 * u[1:-1, 1:-1] - (1.0 - g) * prev[1:-1, 1:-1]
                           + cx * _lap_x(u) + cy * _lap_y(u)) / (1.0 + g)
        prev, u = u, new
    return u, (u - prev) / dt


def _nbody_acc(x, m, G, eps):
    d = x[None, :, :] - x[:, None, :]            # d[i, j] = x_j - x_i
    r2 = (d ** 2).sum(axis=2) + eps ** 2
    np.fill_diagonal(r2, 1.0)                    # the self term is skipped
    s = G * m[None, :] / (r2 * np.sqrt(r2))
    np.fill_diagonal(s, 0.0)
    return (s[:, :, None] * d).sum(axis=1)


def reference_nbody(positions, velocities, masses, n_steps, G, eps, dt, **_):
    x, v = positions.copy(), velocities.copy()
    a = _nbody_acc(x, masses, G, eps)
    for _ in range(n_steps):
        v = v + 0.5 * dt * a
        x = x + dt * v
        a = _nbody_acc(x, masses, G, eps)
        v = v + 0.5 * dt * a
    return x, v


def reference_mass_spring(positions, velocities, pinned, n_steps, k, c, rest_length, mass,
                          gravity, dt, **_):
    x, v = positions.copy(), velocities.copy()
    fixed = pinned != 0
    for _ in range(n_steps):
        d = x[1:] - x[:-1]
        length = np.sqrt((d ** 2).sum(axis=1))
        e = d / length[:, None]
        closing = ((v[1:] - v[:-1]) * e).sum(axis=1)
        f = (k * (length - rest_length) + c * closing)[:, None] * e   # on node i from i+1
        force = np.zeros_like(x)
        force[:-1] += f
        force[1:] -= f
        force[:, 1] -= mass * gravity
        v_new = v + dt * force / mass
        x_new = x + dt * v_new
        x_new[fixed] = x[fixed]
        v_new[fixed] = 0.0
        x, v = x_new, v_new
    return x, v


def reference_pendulums(theta0, omega0, n_steps, dt, damping, drive_amplitude, drive_frequency,
                        g_over_l, t0=0.0, **_):
    def rhs(th, om, t):
        return om, (-g_over_l * np.sin(th) - damping * om
                    + drive_amplitude * np.cos(drive_frequency * t))

    th, om = theta0.copy(), omega0.copy()
    for n in range(n_steps):
        t = t0 + n * dt
        a1, b1 = rhs(th, om, t)
        a2, b2 = rhs(th + dt / 2 * a1, om + dt / 2 * b1, t + dt / 2)
        a3, b3 = rhs(th + dt / 2 * a2, om + dt / 2 * b2, t + dt / 2)
        a4, b4 = rhs(th + dt * a3, om + dt * b3, t + dt)
        th = th + dt / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        om = om + dt / 6 * (b1 + 2 * b2 + 2 * b3 + b4)
    return th, om


def reference_gray_scott(u0, v0, n_steps, F, k, Du, Dv, dt, dx, **_):
    def lap(a):
        return (np.roll(a, 1, 0) + np.roll(a, -1, 0) + np.roll(a, 1, 1) + np.roll(a, -1, 1)
                - 4.0 * a) / dx ** 2

    u, v = u0.copy(), v0.copy()
    for _ in range(n_steps):
        uvv = u * v * v
        u, v = (u + dt * (Du * lap(u) - uvv + F * (1.0 - u)),
                v + dt * (Dv * lap(v) + uvv - (F + k) * v))
    return u, v


# --------------------------------------------------------------------------------------------
# Cases: small problems, few steps (the simulator runs every CUDA thread as a Python thread,
# idle ones too: a launch of the default 128-thread block costs as much as 128 cells)
# --------------------------------------------------------------------------------------------

def _cases():
    rng = np.random.default_rng(7)
    x1 = np.linspace(0.0, 1.0, 37)
    heat_u0 = np.exp(-((x1 - 0.4) / 0.15) ** 2) + 0.1 * rng.uniform(size=37)
    grid = rng.uniform(size=(16, 16))
    odd_grid = rng.uniform(size=(20, 12))
    wave_u0 = np.zeros((16, 16))
    wave_u0[5:10, 6:11] = 0.01 * rng.uniform(size=(5, 5))
    wave_v0 = 0.1 * rng.normal(size=(16, 16))
    pos = rng.normal(size=(12, 3))
    vel = 0.3 * rng.normal(size=(12, 3))
    vel -= vel.mean(axis=0)
    masses = rng.uniform(0.5, 1.5, size=12) / 12
    chain_x = np.zeros((10, 2))
    chain_x[:, 0] = 0.05 * np.arange(10)
    chain_x[:, 1] = 0.002 * rng.normal(size=10)
    chain_v = 0.01 * rng.normal(size=(10, 2))
    pinned = np.zeros(10, dtype=np.int8)
    pinned[[0, 6]] = 1
    gs_u = 1.0 - 0.5 * rng.uniform(size=(16, 16))
    gs_v = 0.25 * rng.uniform(size=(16, 16))
    theta0 = np.linspace(-2.5, 2.5, 40)
    omega0 = rng.normal(size=40)
    return {
        # name: (module, args, kwargs, reference)
        "heat1d_dirichlet": ("heat1d", (heat_u0,),
                             dict(n_steps=10, alpha=0.7, dt=2e-4, dx=1 / 36, left=0.3,
                                  right=-0.2, threads_per_block=16), reference_heat1d),
        "heat1d_periodic": ("heat1d", (heat_u0,),
                            dict(n_steps=10, alpha=0.7, dt=2e-4, dx=1 / 36, periodic=True,
                                 threads_per_block=16), reference_heat1d),
        "heat2d": ("heat2d", (grid,),
                   dict(n_steps=4, alpha=0.05, dt=1e-3, dx=1 / 15, boundary=0.25),
                   reference_heat2d),
        "heat2d_partial_blocks": ("heat2d", (odd_grid,),
                                  dict(n_steps=4, alpha=0.05, dt=1e-3, dx=1 / 19, dy=1 / 11,
                                       boundary=-0.5, threads_per_block=(8, 8)),
                                  reference_heat2d),
        "wave2d": ("wave2d", (wave_u0, wave_v0),
                   dict(n_steps=4, c=1.3, dt=0.02, dx=1 / 15), reference_wave2d),
        "wave2d_damped": ("wave2d", (wave_u0, wave_v0),
                          dict(n_steps=4, c=1.3, dt=0.02, dx=1 / 15, dy=1 / 12, damping=3.0),
                          reference_wave2d),
        "nbody": ("nbody", (pos, vel, masses),
                  dict(n_steps=5, G=1.1, eps=0.1, dt=2e-3, threads_per_block=8),
                  reference_nbody),
        "nbody_unsoftened": ("nbody", (pos, vel, masses),
                             dict(n_steps=3, G=1.0, eps=0.0, dt=1e-3), reference_nbody),
        "mass_spring": ("mass_spring", (chain_x, chain_v, pinned),
                        dict(n_steps=40, k=800.0, c=0.2, rest_length=0.045, mass=0.02,
                             gravity=9.81, dt=2e-4, threads_per_block=8),
                        reference_mass_spring),
        "pendulums": ("pendulums", (theta0, omega0),
                      dict(n_steps=10, dt=0.02, damping=0.4, drive_amplitude=1.1,
                           drive_frequency=0.7, g_over_l=2.0, t0=0.3, threads_per_block=16),
                      reference_pendulums),
        "pendulums_conservative": ("pendulums", (theta0, omega0),
                                   dict(n_steps=20, dt=0.05, damping=0.0, drive_amplitude=0.0,
                                        drive_frequency=1.0, g_over_l=1.5),
                                   reference_pendulums),
        "gray_scott": ("gray_scott", (gs_u, gs_v),
                       dict(n_steps=6, F=0.04, k=0.06, Du=0.16, Dv=0.08, dt=1.0, dx=1.0),
                       reference_gray_scott),
    }


CASES = _cases()

RUNNER = r"""
import copy, importlib, pickle, sys, traceback
import numpy as np
cases = pickle.load(open(sys.argv[1], "rb"))
out = {}
for name, (module, args, kwargs) in cases.items():
    try:
        before = copy.deepcopy(args)
        result = importlib.import_module("simulations." + module).simulate(*args, **kwargs)
        unchanged = all(np.array_equal(a, b) for a, b in zip(args, before))
        out[name] = {"result": result, "inputs_unchanged": unchanged}
    except Exception:
        out[name] = {"error": traceback.format_exc()}
pickle.dump(out, open(sys.argv[2], "wb"))
"""


@pytest.fixture(scope="module")
def simulator_results(tmp_path_factory):
    """Run every case of ``CASES`` under the CUDA simulator, in one subprocess."""
    folder = tmp_path_factory.mktemp("simulator")
    inputs, outputs = folder / "cases.pkl", folder / "results.pkl"
    with open(inputs, "wb") as f:
        pickle.dump({name: case[:3] for name, case in CASES.items()}, f)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(inputs), str(outputs)], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (
        f"the simulator subprocess failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    with open(outputs, "rb") as f:
        return pickle.load(f)


def _result(results, name):
    entry = results[name]
    if "error" in entry:
        pytest.fail(f"simulate() of case {name!r} raised under the simulator:\n{entry['error']}")
    return entry["result"]


def assert_close(got, expected, rtol=RTOL, what=""):
    """Assert ``max|got - expected| <= rtol * max|expected|`` for an array or a tuple of them."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), (
            f"{what}: expected a tuple of {len(expected)} arrays, got {type(got).__name__}")
        for index, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, rtol, f"{what}[{index}]")
        return
    got = np.asarray(got)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    error = np.max(np.abs(got - expected))
    scale = np.max(np.abs(expected))
    assert error <= rtol * scale, (
        f"{what}: max abs error {error:.3e} exceeds {rtol:.0e} x max|reference| = "
        f"{rtol * scale:.3e}")


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_simulator_matches_numpy_reference(simulator_results, name):
    module, args, kwargs, reference = CASES[name]
    kwargs = {key: value for key, value in kwargs.items() if key != "threads_per_block"}
    assert_close(_result(simulator_results, name), reference(*args, **kwargs), what=name)


@pytest.mark.parametrize("name", list(CASES))
def test_inputs_are_not_modified(simulator_results, name):
    _result(simulator_results, name)
    assert simulator_results[name]["inputs_unchanged"], f"{name}: simulate() wrote its inputs"


def test_heat1d_periodic_conserves_heat(simulator_results):
    (u0,) = CASES["heat1d_periodic"][1]
    u = _result(simulator_results, "heat1d_periodic")
    assert abs(u.sum() - u0.sum()) <= RTOL * np.abs(u0).sum()
    assert not np.allclose(u, u0), "the periodic run did not change the state"


def test_nbody_conserves_momentum(simulator_results):
    for name in ("nbody", "nbody_unsoftened"):
        positions, velocities, masses = CASES[name][1]
        _, v = _result(simulator_results, name)
        p0 = (masses[:, None] * velocities).sum(axis=0)
        p1 = (masses[:, None] * v).sum(axis=0)
        scale = (masses[:, None] * np.abs(v)).sum()
        assert np.max(np.abs(p1 - p0)) <= RTOL * scale, f"{name}: momentum {p0} -> {p1}"


def test_pendulum_energy_without_damping_or_drive(simulator_results):
    theta0, omega0 = CASES["pendulums_conservative"][1]
    g_over_l = CASES["pendulums_conservative"][2]["g_over_l"]
    theta, omega = _result(simulator_results, "pendulums_conservative")

    def energy(th, om):
        return 0.5 * om ** 2 + g_over_l * (1.0 - np.cos(th))

    e0, e1 = energy(theta0, omega0), energy(theta, omega)
    assert np.max(np.abs(e1 - e0) / e0) < 1e-5
    assert np.max(np.abs(theta - theta0)) > 0.1, "the pendulums did not move"


def test_mass_spring_pinned_nodes_stay(simulator_results):
    positions, _, pinned = CASES["mass_spring"][1]
    x, v = _result(simulator_results, "mass_spring")
    fixed = pinned != 0
    assert np.array_equal(x[fixed], positions[fixed])
    assert np.all(v[fixed] == 0.0)
    assert np.all(x[~fixed, 1] < positions[~fixed, 1].max()), "the chain did not fall"


# --- the port contract: what `from dualgpu import cuda` relies on ---------------------------

def _source(name):
    return (REPO / "simulations" / f"{name}.py").read_text()


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_cuda_in_one_line(name):
    tree = ast.parse(_source(name))
    cuda_imports = [ast.unparse(node) for node in ast.walk(tree)
                     if isinstance(node, (ast.Import, ast.ImportFrom))
                     and ("numba" in ast.unparse(node) or "dualgpu" in ast.unparse(node))]
    assert cuda_imports == ["from dualgpu import cuda"], (
        f"{name}.py must import CUDA only as the one line `from dualgpu import cuda` "
        f"(the ported form of `from numba import cuda`); found {cuda_imports}")
    assert _source(name).count("\nfrom dualgpu import cuda\n") == 1


FORBIDDEN_ON_PARAMETERS = ("float(", "np.float64(", "np.float32(", "np.asarray(", "np.array(")


@pytest.mark.parametrize("name", MODULES)
def test_simulate_does_not_convert_parameters(name):
    """Parameters may be dual numbers after the port: simulate() must not coerce them."""
    tree = ast.parse(_source(name))
    simulate = next(node for node in tree.body
                    if isinstance(node, ast.FunctionDef) and node.name == "simulate")
    body = ast.unparse(simulate)
    for forbidden in FORBIDDEN_ON_PARAMETERS:
        assert forbidden not in body, f"{name}.simulate() calls {forbidden!r}"
    assert "global " not in _source(name)


@pytest.mark.parametrize("name", MODULES)
def test_module_documents_its_api(name):
    module = importlib.import_module(f"simulations.{name}")
    assert len(module.__doc__) > 400
    assert "simulate" in module.__all__ and "default_initial_state" in module.__all__
    for attribute in module.__all__:
        assert hasattr(module, attribute), f"{name}.__all__ names missing {attribute!r}"
    parameters = inspect.signature(module.simulate).parameters
    for parameter in parameters:
        documented = re.search(rf"^ *(\w+, )*{parameter}(, \w+)* :", module.simulate.__doc__,
                               re.MULTILINE)
        assert documented, f"{name}.simulate() does not document its parameter {parameter!r}"


def test_package_lists_every_module():
    import simulations

    assert sorted(simulations.__all__) == sorted(MODULES)


# --- kernels compile for a real GPU (typing the simulator does not check) -----------------

def _kernel_signatures():
    import numba

    f = numba.float64
    a1 = numba.typeof(np.zeros(3))
    a2 = numba.typeof(np.zeros((3, 3)))
    i8 = numba.typeof(np.zeros(3, dtype=np.int8))
    return {
        ("heat1d", "step_dirichlet"): (a1, a1, f, f, f),
        ("heat1d", "step_periodic"): (a1, a1, f),
        ("heat2d", "step"): (a2, a2, f, f, f),
        ("wave2d", "start"): (a2, a2, a2, f, f, f, f),
        ("wave2d", "step"): (a2, a2, a2, f, f, f),
        ("wave2d", "half_step_velocity"): (a2, a2, f, a2),
        ("nbody", "accelerations"): (a2, a1, f, f, a2),
        ("nbody", "kick_drift"): (a2, a2, a2, f),
        ("nbody", "kick"): (a2, a2, f),
        ("mass_spring", "step"): (a2, a2, a2, a2, i8) + (f,) * 6,
        ("pendulums", "advance"): (a1, a1) + (f,) * 6,
        ("gray_scott", "step"): (a2, a2, a2, a2) + (f,) * 5,
    }


@pytest.mark.parametrize("module_name, kernel_name", list(_kernel_signatures()))
def test_kernels_compile_to_ptx(offline_ptx, module_name, kernel_name):
    """The function the GPU backend hands numba.cuda (``cuda`` rebound to numba.cuda)."""
    from numba import cuda

    from dualgpu.backends.gpu import kernel as gpu

    kernel = getattr(importlib.import_module(f"simulations.{module_name}"), kernel_name)
    signature = _kernel_signatures()[(module_name, kernel_name)]
    ptx, _ = cuda.compile_ptx(gpu.prepare_function(kernel.py_func), signature, cc=offline_ptx)
    assert ".entry" in ptx


# --- a real GPU, when there is one ----------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_on_gpu(name):
    module, args, kwargs, reference = CASES[name]
    before = [a.copy() for a in args]
    got = importlib.import_module(f"simulations.{module}").simulate(*args, **kwargs)
    assert all(np.array_equal(a, b) for a, b in zip(args, before))
    kwargs = {key: value for key, value in kwargs.items() if key != "threads_per_block"}
    assert_close(got, reference(*args, **kwargs), what=f"{name} on the GPU")
