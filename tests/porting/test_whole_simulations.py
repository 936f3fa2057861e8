"""Whole simulations written for numba.cuda (``kernels_simulations.py``), ported by the import.

For each simulation: the plain run equals the unported code (numba's CUDA simulator, the
kernels rebound to numba.cuda), and Jacobians w.r.t. initial states and scalar parameters
agree with central differences on the ``cpu`` and ``cudasim`` backends; the dual kernels
compile to PTX. Then the host code users write around them (objectives, jacfwd with
keywords, jvp_batch, sparse detection, ensembles) and what users get wrong.

Compile cost keeps the cpu backend to a subset of the simulations (the cudasim backend
runs them all); together these tests take about 30 s on 2 cores.
"""
import warnings

import numba
import numba.cuda
import numpy as np
import pytest

import dualgpu
import kernels_simulations as K
from dualgpu import DualgpuError, dual_array
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.testing import check_jacobian
from unported import run_unported

_RNG = np.random.default_rng(11)
U0 = np.sin(np.linspace(0, 3, 12)) + 0.2
C0 = _RNG.random((6, 5)).astype(np.float32)
W0 = np.exp(-((np.arange(7)[:, None] - 3) ** 2 + (np.arange(6)[None, :] - 2.5) ** 2) / 2.0)
S0, I0, BETA = np.full(5, 0.95), np.linspace(0.01, 0.05, 5), np.linspace(0.8, 1.6, 5)
X32 = np.linspace(1.0, 2.0, 6).astype(np.float32)
Y32 = np.linspace(0.5, 1.0, 6).astype(np.float32)
POS = np.stack([np.arange(5) * 1.1, 0.1 * np.sin(np.arange(5))], 1)
VEL = 0.1 * np.cos(np.arange(10)).reshape(5, 2)
NPOS, NVEL, NMASS = (_RNG.random((5, 2)) * 2, _RNG.standard_normal((5, 2)) * 0.1,
                     _RNG.random(5) + 0.5)
GU, GV = 1 - 0.3 * _RNG.random((5, 6)), 0.3 * _RNG.random((5, 6))
STRAIN, RATE = np.linspace(-0.8, 0.9, 9), np.linspace(0.7, -0.6, 9)
A2, H3 = _RNG.random((6, 3)) + 0.5, _RNG.random((4, 5, 4))

# name: (simulation, arguments, run on cpu too)
SIMS = {
    "heat_eager_f64": (K.simulate_heat_eager, (U0, 0.2), True),
    "diffuse2d_eager_f32": (K.simulate_diffuse2d_f32, (C0, np.float32(0.1)), True),
    "wave2d_three_buffers": (K.simulate_wave2d, (W0, 1.3), False),
    "sir_rk4_inline_tuples": (K.simulate_sir, (S0, I0, BETA, 0.3), True),
    "lotka_volterra_f32": (K.simulate_lotka_volterra, (X32, Y32, np.float32(1.1),
                                                       np.float32(0.4)), False),
    "springs_atomic_verlet": (K.simulate_springs, (POS, VEL, 3.0), False),
    "nbody_pairs_atomic_2d": (K.simulate_nbody_pairs, (NPOS, NVEL, NMASS), False),
    "gray_scott_periodic": (K.simulate_gray_scott, (GU, GV, 0.04, 0.06), False),
    "material_math": (K.simulate_material, (STRAIN, RATE, 2.0, 0.5), False),
    "device_slice_interior": (K.simulate_sliced, (U0, 0.25), False),
    "device_slice_column": (K.simulate_column, (A2, 0.7), False),
    "numpy_in_kernel_size": (K.simulate_damped, (U0 - 0.5, np.cos(U0), 0.8), False),
    "heat3d_grid3": (K.simulate_heat3d, (H3, 0.1), False),
    "advect_stream_int_bool": (K.simulate_advect_stream, (U0, 0.4), False),
    "trajectory_list_stack": (K.simulate_trajectory_list, (np.linspace(0.1, 0.9, 5), 3.2), False),
}
CASES = [pytest.param(name, "cudasim", id=f"{name}-cudasim") for name in SIMS] + [
    pytest.param(name, "cpu", id=f"{name}-cpu") for name, s in SIMS.items() if s[2]]


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _float_argnums(args):
    return tuple(k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f")


@pytest.fixture(scope="module")
def unported_results():
    """Each simulation run by the unported code: numba's simulator, numba.cuda allocation."""
    return run_unported(K, SIMS)


@pytest.mark.parametrize("name, backend", CASES)
def test_plain_run_equals_unported(name, backend, unported_results):
    f, args, _ = SIMS[name]
    with dualgpu.using_backend(backend):
        got = _tuple(f(*args))
    for g, e in zip(got, unported_results[name]):
        assert type(g) is np.ndarray and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name, backend", CASES)
def test_jacobian_matches_differences(name, backend):
    f, args, _ = SIMS[name]
    with dualgpu.using_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("ignore", dualgpu.errors.ChunkSizeWarning)
        check_jacobian(f, *args, argnums=_float_argnums(args), n_directions=2)


# --- the dual kernels compile for the GPU -------------------------------------------------

def _dual_launch_types(f, args):
    """{py_func: argument types} of every kernel launch of a 2-lane jvp of ``f`` on the cpu."""
    from dualgpu.backends.cpu.kernel import CpuKernel

    seen, launch = {}, CpuKernel.launch

    def record(self, griddim, blockdim, launch_args, sharedmem=0):
        seen.setdefault(self.py_func, tuple(numba.typeof(a) for a in launch_args))
        return launch(self, griddim, blockdim, launch_args, sharedmem)

    tangents = tuple(np.ones_like(a) if isinstance(a, np.ndarray) else type(a)(1.0) for a in args)
    CpuKernel.launch = record
    try:
        with dualgpu.using_backend("cpu"):
            dualgpu.jvp_batch(f, args, tuple(np.stack([t, t]) for t in tangents))
    finally:
        CpuKernel.launch = launch
    return seen


@pytest.mark.parametrize("name", ["nbody_pairs_atomic_2d", "sir_rk4_inline_tuples",
                                  "diffuse2d_eager_f32"])
def test_dual_kernels_compile_to_ptx(offline_ptx, name):
    """Atomic force accumulation into dual arrays compiles: value and each lane atomically."""
    f, args, _ = SIMS[name]
    for py_func, argtypes in _dual_launch_types(f, args).items():
        ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(py_func, 2), argtypes,
                                        cc=offline_ptx)
        if py_func.__name__ == "pair_accelerations":  # 2 atomic adds of a 2-lane dual
            atomics = [line for line in ptx.splitlines() if "atom.global.add.f64" in line]
            assert len(atomics) == 2 * 3  # the value and each lane


def test_atomic_max_of_duals_on_the_gpu_names_the_op(offline_ptx):
    from numba import types

    from dualgpu.compiled.arrays import dual_array_type

    @dualgpu.jit
    def running_max(x, m):
        i = dualgpu.cuda.grid(1)
        if i < x.shape[0]:
            dualgpu.cuda.atomic.max(m, 0, x[i])

    t = dual_array_type(types.float64, 1, 2)
    with pytest.raises(dualgpu.UnsupportedFeatureError,
                       match=r"^cuda\.atomic\.max on a dual array is not supported on the cuda "
                             r"backend.*the cpu and cudasim backends run it"):
        numba.cuda.compile_ptx(gpu.prepare_function(running_max.py_func, 2), (t, t),
                               cc=offline_ptx)


# --- eager signatures convert and check arguments as numba.cuda's launch does ---------------

@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_eager_float32_signature_casts_a_python_float(backend):
    """numba.cuda makes 0.1 a float32 for a float32 parameter: the kernel computes in float32."""
    with dualgpu.using_backend(backend):
        from_python_float = K.simulate_diffuse2d_f32(C0, 0.1)
        from_float32 = K.simulate_diffuse2d_f32(C0, np.float32(0.1))
        out, tangent = dualgpu.jvp(K.simulate_diffuse2d_f32, (C0, 0.1), (None, 1.0))
    np.testing.assert_array_equal(from_python_float, from_float32)
    np.testing.assert_array_equal(out, from_float32)
    assert tangent.dtype == np.float32


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_eager_signature_refuses_an_integer_array(backend):
    """np.arange(n) as the state of a float64[:] kernel: numba.cuda would read int bytes."""
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as info:
        K.simulate_heat_eager(np.arange(12), 0.2)
    message = str(info.value)
    assert "heat_eager" in message and "argument u must be array(float64, 1d, A)" in message
    assert "got an array of int64" in message and "np.asarray(x, dtype=np.float64)" in message


def test_eager_signature_refuses_a_strided_array_for_a_contiguous_parameter():
    @dualgpu.jit("void(float64[::1], float64[::1])")
    def copy(a, b):
        i = dualgpu.cuda.grid(1)
        if i < a.shape[0]:
            b[i] = a[i]

    with dualgpu.using_backend("cpu"), pytest.raises(DualgpuError, match="C-contiguous"):
        copy[1, 8](np.ones((4, 2))[:, 0], np.zeros(4))


def test_eager_signature_keeps_a_dual_parameter_dual():
    u = dual_array(U0, lanes=1)
    u.partials[0, 3] = 1.0
    with dualgpu.using_backend("cpu"):
        v = dualgpu.cuda.device_array_like(u)
        K.heat_eager[1, 16](u, v, dualgpu.Dual(0.2, [1.0]))
    assert v.partials[0, 3] == pytest.approx(1.0 - 2 * 0.2 + (U0[2] - 2 * U0[3] + U0[4]))


# --- host code around the simulations -------------------------------------------------------

_DATA = 0.5 * U0


def _objective(u0, r, *, weight=2.0, n_steps=6):
    u = K.simulate_heat_eager(u0, r, n_steps=n_steps)
    return (weight * np.linalg.norm(u[1:-1] - _DATA[1:-1]) + np.mean(u ** 2)
            - np.sum(u[::2]) / u.size)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_host_objective_several_arguments_and_keywords(backend):
    with dualgpu.using_backend(backend):
        check_jacobian(lambda u, r, w: _objective(u, r, weight=w), U0, 0.2, 1.5, argnums=(0, 1, 2))
        d_r = dualgpu.jacfwd(_objective, argnums=1)(U0, 0.2, weight=3.0, n_steps=4)
        h = 1e-6
        fd = (_objective(U0, 0.2 + h, weight=3.0, n_steps=4)
              - _objective(U0, 0.2 - h, weight=3.0, n_steps=4)) / (2 * h)
    assert d_r == pytest.approx(fd, rel=1e-6)


def test_jvp_batch_and_ensemble_of_an_sir_model():
    with dualgpu.using_backend("cudasim"):
        V = np.eye(12)[:3]
        _, tangents = dualgpu.jvp_batch(K.simulate_heat_eager, (U0, 0.2), (V, None))
        J = dualgpu.jacobian(K.simulate_heat_eager, U0, 0.2, argnums=0)
        np.testing.assert_allclose(tangents, V @ J.T, rtol=1e-13, atol=1e-15)
        sir = lambda s, i, b, g: K.simulate_sir(s, i, b, g)[:2]
        E = dualgpu.ensemble_jacobian(sir, S0, I0, BETA, 0.3, argnums=(0, 1, 2, 3),
                                      batch_axes=(0, 0, 0, None), validate=True)
        full = dualgpu.jacobian(sir, S0, I0, BETA, 0.3, argnums=(0, 1, 2, 3))
    assert E.shape == (5, 2, 4)
    for m in range(5):  # member m's outputs w.r.t. its own s, i, beta and the shared gamma
        np.testing.assert_allclose(E[m, 1], [full[1][0][m, m], full[1][1][m, m],
                                             full[1][2][m, m], full[1][3][m]], rtol=1e-12)


def test_sparse_detection_through_atomics():
    """A spring chain, one step: atomics into a dual array, a banded Jacobian."""
    pos = np.stack([np.arange(12) * 1.1, 0.1 * np.sin(np.arange(12))], 1)
    f = lambda p: K.simulate_springs(p, np.zeros_like(p), 3.0, n_steps=1)[0]
    with dualgpu.using_backend("cudasim"):  # detection itself runs on the cpu backend
        J = dualgpu.jacobian(f, pos, sparsity="detect")
        dense = dualgpu.jacobian(f, pos)
        check_jacobian(f, pos, n_directions=2)
    np.testing.assert_allclose(dualgpu.sparse.to_dense(J), dense, rtol=1e-13, atol=1e-15)
    assert J.coloring.n_colors < pos.size / 2


# --- what users get wrong ----------------------------------------------------------------

@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_trajectory_into_a_plain_numpy_buffer_says_what_to_do(backend):
    with dualgpu.using_backend(backend), pytest.raises(TypeError) as info:
        dualgpu.jvp(K.simulate_trajectory_preallocated, (np.linspace(0.1, 0.9, 5), 3.2),
                    (None, 1.0))
    assert "np.stack" in str(info.value)
