"""Block-level, synchronisation-heavy kernels (``kernels_block_sync.py``), ported with one line.

For each simulation built from them:

* plain results equal a NumPy reference (numba's own simulator runs all of them except the
  warp shuffles and the grid-wide sync, which it lacks; they were checked there too);
* Jacobians w.r.t. the initial array and a scalar parameter agree with central differences
  on ``cudasim`` (all), and on ``cpu`` for the kernels whose constructs the cpu tests did not
  cover yet (float atomics with tuple indices, atomic max/min); the cpu's block kernels
  compile for seconds each, so the others (all passing there too) stay out of the suite.
  A multi-phase grid-sync kernel fed ``np.array([np.sum(u0) * 1.1, 0.0])`` failed on the
  cpu with a numba typing error on an object array: arrays of duals built that way are now
  DualArrays (tested below on both backends with a small kernel);
* the dual versions compile to PTX (``cuda.fma``, ``cuda.selp`` and ``cuda.atomic.add`` of
  duals, which the cuda backend did not compile before), and what a GPU cannot do for duals
  (``atomic.max`` on a dual array, the old value of a dual ``atomic.add``) is refused with
  the fix.
"""
import re

import numpy as np
import pytest
from numba import cuda as numba_cuda
from numba import types

import dualgpu
import kernels_block_sync as K
from dualgpu import DualArray, DualgpuError, cuda
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type
from dualgpu.testing import check_jacobian

F64, F32, I64 = types.float64, types.float32, types.int64


# --- simulations ----------------------------------------------------------------------------

def _cases():
    rng = np.random.default_rng(5)
    u20 = np.sin(np.linspace(0, 3, 20)) + 0.2 * rng.standard_normal(20)
    pos = np.array([[0.0, 0.0], [1.1, 0.1], [0.2, 1.05], [1.3, 1.2], [2.1, 0.4]])
    bonds = np.array([[0, 1], [0, 2], [1, 3], [2, 3], [3, 4], [1, 4], [0, 3]], np.int64)
    rest = np.full(7, 1.0)
    A = rng.standard_normal((5, 5)) * 0.4
    X0 = rng.standard_normal((5, 3))
    uh = rng.random((6, 7))
    x44 = rng.standard_normal(44)
    rho = rng.random(13) + 0.5
    st = np.stack([rng.random(6) - 0.5, rng.random(6) - 0.5], 1)
    u3 = rng.random((3, 4, 5))
    u16 = np.sin(np.linspace(0, 2 * np.pi, 16, endpoint=False)) + 0.3 * rng.standard_normal(16)
    f32 = np.float32

    def springs(p, k):
        return K.simulate_springs(p, k, bonds, rest)

    # name: (simulation, (initial array, scalar parameter), reference)
    return {
        "tree_reduce_atomic_add": (K.simulate_spring_energy, (u20, 1.3),
                                   lambda: K.spring_energy_reference(u20, 1.3)),
        "warp_shuffle_activemask": (K.simulate_warp_norm2, (x44, 0.7),
                                    lambda: np.array([0.7 * np.sum(x44 ** 2)])),
        "bond_atomics_tuple_index": (springs, (pos, 2.0),
                                     lambda: K.springs_reference(pos, 2.0, bonds, rest)),
        "atomic_max_min_cfl": (K.simulate_cfl, (u20, 0.5), lambda: K.cfl_reference(u20, 0.5)),
        "gemm_two_tiles_fma": (K.simulate_gemm_power, (A, X0, 0.9),
                               lambda: K.gemm_power_reference(A, X0, 0.9)),
        "gemm_two_tiles_fma_f32": (
            lambda a, x, s: K.simulate_gemm_power(a, x, s, f32=True),
            (A.astype(f32), X0.astype(f32), f32(0.9)),
            lambda: K.gemm_power_reference(A.astype(f32), X0.astype(f32), 0.9)),
        "heat_halo_edge_threads": (K.simulate_heat_halo, (uh, 0.2),
                                   lambda: K.heat_halo_reference(uh, 0.2)),
        "heat_halo_edge_threads_f32": (
            lambda u, r: K.simulate_heat_halo(u, r, f32=True), (uh.astype(f32), f32(0.2)),
            lambda: K.heat_halo_reference(uh.astype(f32), 0.2)),
        "blelloch_scan": (K.simulate_cumulative_mass, (rho, 0.1),
                          lambda: K.cumulative_mass_reference(rho, 0.1)),
        "dynamic_shared_slices": (K.simulate_dynamic_slices, (u20, 0.3),
                                  lambda: K.dynamic_slices_reference(u20, 0.3)),
        "int32_index_scratch": (K.simulate_hot_energy, (u20, 0.3),
                                lambda: K.hot_energy_reference(u20, 0.3)),
        "threadfence_last_block": (K.simulate_weighted_sum, (x44, rho[0] + x44 ** 2),
                                   lambda: np.array([np.sum(x44 * (rho[0] + x44 ** 2))])),
        "jacobi_syncthreads_or_count": (K.simulate_jacobi, (u20, 0.5),
                                        lambda: K.jacobi_reference(u20, 0.5)),
        "const_array_laplace4": (K.simulate_laplace4, (u20, 0.1),
                                 lambda: K.laplace4_reference(u20, 0.1)),
        "const_array_laplace4_f32": (
            lambda u, nu: K.simulate_laplace4(u, nu, f32=True), (u20.astype(f32), f32(0.1)),
            lambda: K.laplace4_reference(u20.astype(f32), 0.1)),
        "local_array_rk4": (K.simulate_duffing, (st, 0.3, 1.2),
                            lambda: K.duffing_reference(st, 0.3, 1.2)),
        "grid3_stride": (K.simulate_diffuse3d, (u3, 0.1), lambda: K.diffuse3d_reference(u3, 0.1)),
        "selp_fma_early_return": (K.simulate_muscl, (u20, 0.4),
                                  lambda: K.muscl_reference(u20, 0.4)),
        "selp_fma_early_return_f32": (
            lambda u, c: K.simulate_muscl(u, c, f32=True), (u20.astype(f32), f32(0.4)),
            lambda: K.muscl_reference(u20.astype(f32), 0.4)),
        "device_fn_shared_arg": (K.simulate_layer_norm, (u16, 1.5),
                                 lambda: K.layer_norm_reference(u16, 1.5)),
        "grid_sync_multiphase": (K.simulate_conservative, (u20, 0.2),
                                 lambda: K.conservative_reference(u20, 0.2)),
        "shared_reduce_f32": (K.simulate_sum_sq_f32, (x44.astype(f32), f32(0.7)),
                              lambda: np.array([0.7 * np.sum(x44.astype(f32).astype(float) ** 2)])),
    }


CASES = _cases()
#: the cpu backend compiles block kernels for seconds: only the constructs new to its tests
CPU_CASES = ("bond_atomics_tuple_index", "atomic_max_min_cfl")
#: minmod kinks lie within a float32 difference step of these inputs: checked against float64
KINKED_F32 = "selp_fma_early_return_f32"


@pytest.mark.parametrize("name", list(CASES))
def test_plain_equals_numpy_reference_cudasim(name):
    simulate, args, reference = CASES[name]
    with dualgpu.using_backend("cudasim"):
        got = simulate(*args)
    f32 = name.endswith("_f32")
    assert type(got) is not DualArray
    assert got.dtype == (np.float32 if f32 else np.float64)
    np.testing.assert_allclose(got, reference(), rtol=3e-6 if f32 else 1e-12,
                               atol=3e-6 if f32 else 1e-13)


def _jacobian_cases(backend):
    names = list(CASES) if backend == "cudasim" else list(CPU_CASES)
    return [(backend, n) for n in names if n != KINKED_F32]


@pytest.mark.parametrize("backend,name", _jacobian_cases("cudasim") + _jacobian_cases("cpu"))
def test_jacobian_state_and_parameter(backend, name):
    simulate, args, _ = CASES[name]
    with dualgpu.using_backend(backend):
        if backend == "cpu":  # also the plain run on the cpu
            np.testing.assert_allclose(simulate(*args), CASES[name][2](), rtol=1e-12,
                                       atol=1e-13)
        check_jacobian(simulate, *args, argnums=(0, 1), n_directions=2)


def test_float32_minmod_jacobian_equals_float64():
    """The float64 twin's Jacobian is checked against differences above; the float32 one
    equals it to float32 rounding (differences in float32 step over minmod's kinks)."""
    simulate, args, _ = CASES[KINKED_F32]
    simulate64, args64, _ = CASES["selp_fma_early_return"]
    with dualgpu.using_backend("cudasim"):
        j32 = dualgpu.jacobian(simulate, *args, argnums=(0, 1), progress=False)
        j64 = dualgpu.jacobian(simulate64, args[0].astype(np.float64), float(args[1]),
                               argnums=(0, 1), progress=False)
    for a, b in zip(j32, j64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())


# --- host arrays built from duals: np.array([dual, 0.0]) --------------------------------------

@cuda.jit
def _scale(a, s):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = a[i] * s


def _object_array_argument(x, s):
    values = np.array([np.sum(x), 2.0, x[1] * x[2]])  # an object array under the driver
    _scale[1, 4](values, s)  # launched as a DualArray and written back, as numba copies back
    return values  # the driver takes the object array of duals as f's result


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_object_array_of_duals_as_kernel_argument_and_result(backend):
    x = np.linspace(0.1, 1.0, 5)
    with dualgpu.using_backend(backend):
        np.testing.assert_allclose(_object_array_argument(x, 3.0),
                                   [3 * x.sum(), 6.0, 3 * x[1] * x[2]], rtol=1e-15)
        check_jacobian(_object_array_argument, x, 3.0, argnums=(0, 1))
        jac = dualgpu.jacobian(_object_array_argument, x, 3.0, argnums=0, progress=False)
    expected = np.zeros((3, 5))
    expected[0] = 3.0
    expected[2, 1], expected[2, 2] = 3 * x[2], 3 * x[1]
    np.testing.assert_allclose(jac, expected, rtol=1e-15)


def test_object_array_to_device_and_copy_into_buffer():
    x = np.linspace(0.1, 1.0, 5)

    def f(x):
        d = cuda.to_device(np.array([np.sum(x), 0.5]))
        buffer = cuda.device_array(2)
        cuda.to_device(np.array([x[0], np.max(x)]), to=buffer)
        return d.copy_to_host() * buffer.copy_to_host()

    with dualgpu.using_backend("cudasim"):
        jac = dualgpu.jacobian(f, x, progress=False)
    expected = np.zeros((2, 5))
    expected[0] = x[0]
    expected[0, 0] += x.sum()
    expected[1, 4] = 0.5
    np.testing.assert_allclose(jac, expected, rtol=1e-15)


def test_object_array_of_other_objects_is_refused_by_name():
    with dualgpu.using_backend("cudasim"), pytest.raises(DualgpuError) as info:
        cuda.to_device(np.array([1.0, "a"], dtype=object))
    assert "dtype object holding str" in str(info.value) and "np.stack" in str(info.value)


# --- the GPU path, offline: dual PTX ----------------------------------------------------------

@pytest.fixture
def _offline(offline_ptx):
    return offline_ptx


def _ptx(kernel, signature, lanes):
    ptx, _ = numba_cuda.compile_ptx(gpu.prepare_function(kernel, lanes), signature, cc=(9, 0))
    return ptx


def _signatures(n):
    def A(ndim, dt=F64):
        return dual_array_type(dt, ndim, n)

    def D(dt=F64):
        return dual_type(dt, n)

    return {
        "spring_energy_reduce": (A(1), D(), A(1)),
        "warp_reduce_norm2": (A(1), D(), A(1)),
        "bond_forces": (A(2), types.Array(I64, 2, "C"), A(1), D(), A(2)),
        "gemm_tiled": (A(2), A(2), A(2), D(), F64),
        "gemm_tiled_f32": (A(2, F32), A(2, F32), A(2, F32), D(F32), F32),
        "hot_cell_energy": (A(1), D(), A(1), types.Array(types.int32, 1, "C")),
        "minmod_muscl_f32": (A(1, F32), A(1, F32), D(F32)),
        "conservative_diffusion": (A(1), A(1), A(1), D(), I64),
        "jacobi_block_solve": (A(1), A(1), types.Array(I64, 1, "C"), D()),
    }


@pytest.mark.parametrize("name", list(_signatures(2)))
def test_dual_kernel_compiles_to_ptx(_offline, name):
    ptx = _ptx(getattr(K, name), _signatures(2)[name], 2)
    assert ".entry" in ptx
    if name in ("spring_energy_reduce", "warp_reduce_norm2", "bond_forces",
                "conservative_diffusion"):
        # a dual atomic add is one atomic per member: the value and each of the 2 lanes
        atomics = len(re.findall(r"(?:atom|red)\.global\.add\.f64", ptx))
        assert atomics and atomics % 3 == 0, atomics
    if name.endswith("_f32"):
        assert "fma.rn.f32" in ptx and ".f64" not in ptx.split(".entry", 1)[1]


def test_dual_atomic_max_is_refused_with_the_workaround(_offline):
    n = 2
    A, D = dual_array_type(F64, 1, n), dual_type(F64, n)
    with pytest.raises(dualgpu.UnsupportedFeatureError,
                       match=r"^cuda\.atomic\.max on a dual array is not supported "
                             r"on the cuda backend.*second kernel"):
        _ptx(K.speed_extrema, (A, D, A, A), n)


def test_old_value_of_dual_atomic_add_is_refused(_offline):
    n = 2
    A = dual_array_type(F64, 1, n)
    with pytest.raises(dualgpu.UnsupportedFeatureError,
                       match=r"uses the old value it returns.*statement of its own"):
        _ptx(K.running_offsets, (A, A, A), n)
    plain = types.Array(F64, 1, "C")
    assert ".entry" in _ptx(K.running_offsets, (plain, plain, plain), 0)  # plain: unchanged


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_old_value_of_atomic_add_on_host_backends(backend):
    """The old values are running sums in the order the threads ran (in thread order on the
    cpu, in any order on cudasim), and their partials follow the same order."""
    x = np.array([0.5, 1.0, 2.0, 4.0])  # every subset has its own sum

    def f(x):
        d_out = cuda.device_array(4)
        K.running_offsets[1, 4](cuda.to_device(x), cuda.to_device(np.zeros(1)), d_out)
        return d_out.copy_to_host()

    with dualgpu.using_backend(backend):
        out, tangents = dualgpu.jvp_batch(f, (x,), (np.eye(4),))
    jac = tangents.T  # row i: d out[i] / d x
    order = np.argsort(out)
    np.testing.assert_allclose(np.sort(out), np.concatenate([[0.0], np.cumsum(x[order])[:-1]]))
    np.testing.assert_array_equal(jac[order], np.tril(np.ones((4, 4)), -1)[:, np.argsort(order)])
    if backend == "cpu":
        np.testing.assert_array_equal(order, np.arange(4))
