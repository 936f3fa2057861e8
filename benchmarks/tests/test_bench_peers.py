"""Correctness of the benchmark peers (benchmarks/peers) on tiny problems.

Each peer's Jacobian must agree with the NumPy central-difference Jacobian
(rel 1e-6) and, for heat, with the exact matrix power of the step matrix
(1e-10). JAX and PyTorch tests are skipped when the peer is not installed.
"""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:           # benchmarks/ is not an installed package
    sys.path.insert(0, ROOT)

from benchmarks.peers import numpy_fd, peer_versions, problems  # noqa: E402

# PyTorch warns about its own internal use of torch.jit.script, Taichi about locale at import;
# not ours to fix.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.peers,
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:'locale.getdefaultlocale' is deprecated:DeprecationWarning"),
]

FD_RTOL = 1e-6
EXACT_RTOL = 1e-10

HEAT = {"n": 12, "steps": 7}
NBODY = {"nb": 5, "steps": 3}
PENDULUM = {"m": 7, "steps": 60}

PEER_NAMES = ["jax", "torch", "taichi", "numba-hand"]
PEER_MODULE = {"jax": "jax_cases", "torch": "torch_cases", "taichi": "taichi_cases",
               "numba-hand": "numba_cases"}
#: The library each peer needs (numba is a dependency of dualgpu itself).
PEER_LIBRARY = {"jax": "jax", "torch": "torch", "taichi": "taichi", "numba-hand": "numba"}


@pytest.fixture(autouse=True)
def jax_x64_for_this_test_only():
    """benchmarks/peers/jax_cases turns JAX's x64 flag on for its process (the peers compare
    in float64); here it is on for each test and restored after, so that other test files in
    the same worker see JAX's default."""
    jax = sys.modules.get("jax")
    before = bool(jax.config.jax_enable_x64) if jax is not None else False
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
    yield
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", before)


def peer(name, case=None):
    """Return the peer module, skipping the test if its library is not installed.

    With ``case``, skip (naming why) when the peer does not implement that case.
    """
    library = PEER_LIBRARY[name]
    pytest.importorskip(library, reason=f"{library} is not installed (optional `bench` extra)")
    import importlib
    module = importlib.import_module(f"benchmarks.peers.{PEER_MODULE[name]}")
    if case is not None and case not in module.CASES:
        pytest.skip(f"the {name} peer does not implement {case}")
    return module


def assert_close(actual, expected, rtol, what):
    """Assert agreement relative to the largest entry of expected (Jacobians have many zeros)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape}, expected {expected.shape}")
    scale = np.max(np.abs(expected))
    err = np.max(np.abs(actual - expected))
    assert err <= rtol * scale, (
        f"{what}: max abs error {err:.3e} exceeds {rtol:g} x max |expected| = {rtol * scale:.3e}\n"
        f"actual:\n{actual}\nexpected:\n{expected}")


@pytest.fixture(scope="module")
def fd():
    """NumPy finite-difference reference Jacobians for the tiny problems."""
    return {
        "heat": numpy_fd.heat_jacobian(**problems.heat_setup(**HEAT)),
        "nbody": numpy_fd.nbody_mass_jacobian(**problems.nbody_setup(**NBODY)),
        "pendulum": numpy_fd.pendulum_param_jacobian(**problems.pendulum_setup(**PENDULUM)),
    }


# ---------------------------------------------------------------------------
# problems and the NumPy reference
# ---------------------------------------------------------------------------

def test_heat_forward_is_the_step_matrix_power():
    data = problems.heat_setup(**HEAT)
    exact = problems.heat_exact_jacobian(HEAT["n"], data["r"], data["steps"])
    assert_close(problems.heat_forward(**data), exact @ data["u0"], EXACT_RTOL, "heat forward")


def test_forward_functions_accept_a_batch():
    heat = problems.heat_setup(**HEAT)
    batch = np.stack([heat["u0"], 2 * heat["u0"]])
    out = problems.heat_forward(batch, heat["r"], heat["steps"])
    assert_close(out[1], problems.heat_forward(**heat) * 2, EXACT_RTOL, "heat batch")

    nb = problems.nbody_setup(**NBODY)
    masses = np.stack([nb["masses"], 1.5 * nb["masses"]])
    out = problems.nbody_forward(nb["pos"], nb["vel"], masses, nb["G"], nb["eps"], nb["dt"],
                                 nb["steps"])
    single = problems.nbody_forward(**dict(nb, masses=1.5 * nb["masses"]))
    assert out.shape == (2, NBODY["nb"], 3)
    assert_close(out[1], single, EXACT_RTOL, "nbody batch")

    pend = problems.pendulum_setup(**PENDULUM)
    params = np.stack([pend["params"], pend["params"] + 0.1])
    out = problems.pendulum_forward(pend["theta0"], pend["omega0"], params, pend["dt"],
                                    pend["steps"])
    single = problems.pendulum_forward(**dict(pend, params=pend["params"] + 0.1))
    assert_close(out[1], single, EXACT_RTOL, "pendulum batch")


def test_nbody_centre_of_mass_moves_uniformly():
    data = problems.nbody_setup(**NBODY)
    m = data["masses"]
    final = problems.nbody_forward(**data)
    expected = m @ data["pos"] + data["steps"] * data["dt"] * (m @ data["vel"])
    assert_close(m @ final, expected, 1e-12, "centre of mass")


def test_pendulum_small_oscillation_is_a_cosine():
    theta0 = np.array([1e-4, -2e-4])
    dt, steps = 0.01, 300
    out = problems.pendulum_forward(theta0, np.zeros(2), np.zeros(3), dt, steps)
    assert_close(out, theta0 * np.cos(steps * dt), 1e-6, "undamped small oscillation")


def test_numpy_fd_heat_matches_exact():
    data = problems.heat_setup(**HEAT)
    exact = problems.heat_exact_jacobian(HEAT["n"], data["r"], data["steps"])
    assert_close(numpy_fd.heat_jacobian(**data), exact, EXACT_RTOL, "numpy-fd heat jacobian")
    v = problems.heat_tangent(HEAT["n"])
    assert_close(numpy_fd.heat_jvp(**data, v=v), exact @ v, EXACT_RTOL, "numpy-fd heat jvp")


def test_central_jacobian_batches_agree():
    f = lambda x: np.stack([np.sin(x[:, 0]) * x[:, 1], x[:, 1] ** 3, x[:, 0] + x[:, 2]], axis=1)
    x = np.array([0.3, -1.2, 2.0])
    exact = np.array([[np.cos(0.3) * -1.2, np.sin(0.3), 0.0], [0.0, 3 * 1.44, 0.0],
                      [1.0, 0.0, 1.0]])
    for batch in (1, 2, 3, 5):
        assert_close(numpy_fd.central_jacobian(f, x, 1e-5, batch), exact, 1e-8, f"batch {batch}")


def test_central_jacobian_rejects_bad_arguments():
    with pytest.raises(ValueError, match="step h must be positive"):
        numpy_fd.central_jacobian(lambda x: x, np.ones(2), 0.0, 1)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        numpy_fd.central_jacobian(lambda x: x, np.ones(2), 1e-3, 0)


def test_prepare_rejects_unknown_case():
    with pytest.raises(KeyError, match="unknown case 'heat'"):
        numpy_fd.prepare("heat")


def test_peer_versions_reports_every_peer():
    versions = peer_versions()
    assert set(versions) == {"jax", "torch", "taichi", "numba-hand", "numpy-fd"}
    assert versions["numpy-fd"] == np.__version__


# ---------------------------------------------------------------------------
# JAX and PyTorch against the references
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", PEER_NAMES)
def test_heat_jacobian(name, fd):
    module = peer(name, "heat_jacobian")
    data = problems.heat_setup(**HEAT)
    jac = module.heat_jacobian(**data)
    assert isinstance(jac, np.ndarray) and jac.dtype == np.float64
    exact = problems.heat_exact_jacobian(HEAT["n"], data["r"], data["steps"])
    assert_close(jac, exact, EXACT_RTOL, f"{name} heat jacobian vs exact")
    assert_close(jac, fd["heat"], FD_RTOL, f"{name} heat jacobian vs fd")


@pytest.mark.parametrize("name", PEER_NAMES)
def test_heat_jvp(name):
    module = peer(name, "heat_jvp")
    data = problems.heat_setup(**HEAT)
    v = problems.heat_tangent(HEAT["n"])
    exact = problems.heat_exact_jacobian(HEAT["n"], data["r"], data["steps"]) @ v
    assert_close(module.heat_jvp(**data, v=v), exact, EXACT_RTOL, f"{name} heat jvp")


@pytest.mark.parametrize("name", PEER_NAMES)
def test_nbody_mass_jacobian(name, fd):
    module = peer(name, "nbody_mass_jacobian")
    jac = module.nbody_mass_jacobian(**problems.nbody_setup(**NBODY))
    assert jac.shape == (NBODY["nb"] * 3, NBODY["nb"])
    assert_close(jac, fd["nbody"], FD_RTOL, f"{name} nbody mass jacobian")


@pytest.mark.parametrize("name", ["jax", "torch"])
def test_nbody_mass_jacobian_in_chunks(name, fd):
    module = peer(name)
    run = module.prepare_nbody_mass_jacobian(**problems.nbody_setup(**NBODY), chunk_size=2)
    assert_close(run(), fd["nbody"], FD_RTOL, f"{name} chunked nbody mass jacobian")


@pytest.mark.parametrize("name", PEER_NAMES)
def test_pendulum_param_jacobian(name, fd):
    module = peer(name, "pendulum_param_jacobian")
    jac = module.pendulum_param_jacobian(**problems.pendulum_setup(**PENDULUM))
    assert jac.shape == (PENDULUM["m"], 3)
    assert_close(jac, fd["pendulum"], FD_RTOL, f"{name} pendulum param jacobian")


@pytest.mark.parametrize("name", PEER_NAMES)
def test_prepared_callable_repeats(name):
    module = peer(name, "heat_jacobian")
    run = module.prepare("heat_jacobian", **problems.heat_setup(**HEAT))
    np.testing.assert_array_equal(run(), run())


@pytest.mark.parametrize("name", ["jax", "torch", "taichi"])
def test_missing_peer_raises_with_install_hint(name, monkeypatch):
    module = peer(name)
    monkeypatch.setattr(module, "AVAILABLE", False)
    monkeypatch.setattr(module, "IMPORT_ERROR", "ModuleNotFoundError: simulated")
    with pytest.raises(RuntimeError, match="not installed.*simulated.*pip install"):
        module.prepare_heat_jacobian(**problems.heat_setup(**HEAT))


def test_torch_set_threads_returns_previous_count():
    module = peer("torch")
    import torch
    before = torch.get_num_threads()
    assert module.set_threads(1) == before
    assert torch.get_num_threads() == 1
    module.set_threads(before)
    with pytest.raises(ValueError, match="positive integer"):
        module.set_threads(0)
