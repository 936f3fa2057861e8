"""New numba.cuda-style physics kernels ported with ``from dualgpu import cuda``.

The kernels (``kernels_physics.py``, ``kernels_probes.py``) were written for this test the
way users write numba.cuda code, not copied from ``simulations/``. For each:

* plain results equal a NumPy reference and the unported kernel (its ``py_func`` under
  numba's CUDA simulator with ``cuda`` meaning numba.cuda);
* Jacobians w.r.t. initial states and scalar parameters agree with central differences,
  on the ``cpu`` and ``cudasim`` backends.

Constructs that fail are kept as ``xfail(strict=True)`` reproducers.
"""
import warnings

import numpy as np
import pytest

import dualgpu
import dualgpu.cuda
import kernels_probes as L
import kernels_physics as K
from dualgpu import Dual, DualgpuError, dual_array
from unported import original
from dualgpu.testing import check_jacobian, check_jvp

BACKENDS = ("cpu", "cudasim")


# --- inputs ---------------------------------------------------------------------------------

def _inputs():
    rng = np.random.default_rng(7)
    return {
        "u0": np.sin(np.linspace(0, 2 * np.pi, 12, endpoint=False)) + 0.1,  # both signs
        "pos": np.array([[0.0, 0.0], [1.1, 0.1], [0.2, 1.05], [1.3, 1.2], [2.9, 0.3]]),
        "vel": rng.standard_normal((5, 2)) * 0.1,
        "spos": rng.random((6, 3)),
        "smass": rng.random(6) + 0.5,
        "phi0": (rng.random((5, 6)) - 0.5).astype(np.float32),
        "bx": rng.random(5) + 0.5,
        "by": rng.random(5) + 1.0,
    }


I = _inputs()


def _burgers(u, nu):
    return K.simulate_burgers(u, nu)


def _burgers_minmax(u, nu):
    return K.simulate_burgers(u, nu, kernel=K.burgers_upwind_minmax)


def _lj(p, v, eps, sigma):
    return K.simulate_lj(p, v, eps, sigma)


def _allen_cahn(phi, eps2):
    return K.simulate_allen_cahn(phi, eps2)


# name: (simulation, args, argnums, reference)
SIMS = {
    "burgers_branch": (_burgers, (I["u0"], 0.05), (0, 1),
                       lambda: K.burgers_reference(I["u0"], 0.05)),
    "burgers_minmax_copysign": (_burgers_minmax, (I["u0"], 0.05), (0, 1),
                                lambda: K.burgers_reference(I["u0"], 0.05)),
    "lennard_jones_cutoff": (_lj, (I["pos"], I["vel"], 1.0, 1.0), (0, 1, 2, 3),
                             lambda: K.lj_reference(I["pos"], I["vel"], 1.0, 1.0)),
    "sph_density_local_array": (K.simulate_sph_density, (I["spos"], I["smass"], 0.7), (0, 1, 2),
                                lambda: K.sph_reference(I["spos"], I["smass"], 0.7)),
    "allen_cahn_float32_2d": (_allen_cahn, (I["phi0"], np.float32(0.5)), (0, 1),
                              lambda: K.allen_cahn_reference(I["phi0"], 0.5)),
    "brusselator_rk4_stride": (K.simulate_brusselator, (I["bx"], I["by"], 1.0, 3.0, 0.1),
                               (0, 1, 2, 3, 4),
                               lambda: K.brusselator_reference(I["bx"], I["by"], 1.0, 3.0, 0.1)),
}


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SIMS))
def test_plain_equals_numpy_reference(backend, name):
    f, args, _, reference = SIMS[name]
    with dualgpu.using_backend(backend):
        got = _tuple(f(*args))
    expected = _tuple(reference())
    f32 = name.endswith("float32_2d")
    for g, e in zip(got, expected):
        assert type(g) is not dualgpu.DualArray
        assert np.asarray(g).dtype == (np.float32 if f32 else np.float64)
        np.testing.assert_allclose(np.asarray(g, np.float64), e,
                                   rtol=2e-6 if f32 else 1e-12, atol=1e-6 if f32 else 1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SIMS))
def test_jacobian_state_and_parameters(backend, name):
    f, args, argnums, _ = SIMS[name]
    with dualgpu.using_backend(backend):
        check_jacobian(f, *args, argnums=argnums, n_directions=2)


def test_jacobian_shapes_and_parameter_column():
    """JAX nesting for a 3-output simulation; d(energy)/d(eps) is energy/eps (energy is linear in
    eps)."""
    with dualgpu.using_backend("cpu"):
        jac = dualgpu.jacobian(_lj, I["pos"], I["vel"], 1.3, 1.0, argnums=(0, 2), progress=False)
        _, _, energy = _lj(I["pos"], I["vel"], 1.3, 1.0)
    assert len(jac) == 3 and all(len(j) == 2 for j in jac)
    assert jac[0][0].shape == (5, 2, 5, 2) and jac[0][1].shape == (5, 2)
    assert jac[2][0].shape == (5, 5, 2) and jac[2][1].shape == (5,)
    # trajectories depend on eps, so only the t=0 energy would be exactly linear; check sign/size
    assert np.all(np.isfinite(jac[2][1])) and np.abs(jac[2][1]).max() > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_tuple_output_matches_jacobian(backend):
    t_a = 1.0
    with dualgpu.using_backend(backend):
        out, tan = dualgpu.jvp(K.simulate_brusselator, (I["bx"], I["by"], 1.0, 3.0, 0.1),
                               (None, None, t_a, None, None))
        jac = dualgpu.jacobian(K.simulate_brusselator, I["bx"], I["by"], 1.0, 3.0, 0.1,
                               argnums=2, progress=False)
    np.testing.assert_allclose(tan[0], jac[0] * t_a, rtol=1e-13)
    np.testing.assert_allclose(tan[1], jac[1] * t_a, rtol=1e-13)
    np.testing.assert_allclose(out[0], K.brusselator_reference(I["bx"], I["by"], 1.0, 3.0, 0.1)[0])


# --- single launches vs the unported kernel ------------------------------------------------

def _launch_cases():
    u0, pos = I["u0"], I["pos"]
    n = len(u0)
    return {
        "burgers_upwind_branch": (2, 8, lambda: [u0, np.zeros(n), 0.1, 0.05]),
        "burgers_upwind_minmax": (2, 8, lambda: [u0, np.zeros(n), 0.1, 0.05]),
        "lj_forces": (1, 8, lambda: [pos, np.zeros((5, 2)), np.zeros(5), 1.0, 1.0, 6.25]),
        "sph_density": (1, 8, lambda: [I["spos"], I["smass"], np.zeros(6), 0.7]),
        "allen_cahn_step": ((1, 2), (8, 4), lambda: [I["phi0"], np.zeros((5, 6), np.float32),
                                                     np.float32(0.05), np.float32(0.5),
                                                     np.float32(1.0)]),
        "brusselator_ensemble": (2, 4, lambda: [I["bx"].copy(), I["by"].copy(), 1.0, 3.0, 0.1,
                                                0.02, 5]),
    }


LAUNCHES = _launch_cases()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(LAUNCHES))
def test_launch_equals_unported_kernel(backend, name):
    griddim, blockdim, make = LAUNCHES[name]
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in make()]
    original(getattr(K, name))[griddim, blockdim](*expected)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in make()]
    with dualgpu.using_backend(backend):
        getattr(K, name)[griddim, blockdim](*got)
    for g, e in zip(got, expected):
        if isinstance(e, np.ndarray):
            assert g.dtype == e.dtype
            rtol = 1e-12 if e.dtype == np.float64 else 2e-6
            np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol)


# --- smaller constructs that work -----------------------------------------------------------

_U = np.linspace(0.1, 0.9, 7) + 0.013
_R = np.random.default_rng(3)
PROBES_OK = {
    # early `return 0.0, 0.0` in a device function, `acc = 0` (int) += dual
    "early_return_float_tuple": (L.f_early_return_tuple, (2 * _U, 0.7)),
    "eager_signature_string": (L.f_eager, (_U, 0.7)),
    "row_view_of_2d_array": (L.f_row_view, (_R.random((5, 3)), 0.7)),
    # uneven spacing: equal distances would be min() ties (a kink, not a bug)
    "math_inf_running_min": (L.f_running_min, (np.array([0.05, 0.3, 0.9, 1.4, 2.2, 3.1, 4.6]),
                                               0.7)),
    "ternary_float_or_dual": (L.f_ternary, (_U, 0.7)),
    "local_array_2d_keywords_math_pow": (L.f_local2d, (_U, 0.7)),
    "explicit_xy_indices_gridsize2": (L.f_explicit_2d, (_R.random((3, 5)), 0.7)),
    "inplace_augmented_size_len": (L.f_inplace, (_U, 0.7)),
    "grid3_3d_array": (L.f_3d, (_R.random((2, 3, 4)), 0.7)),
    "negative_int_and_float_powers_hypot_atan2_fmod": (L.f_powers, (_U, 0.7)),
    "tuple_argument_to_device_function": (L.f_tuple_arg, (_R.random((5, 3)), 0.7)),
    "int_index_array_and_int_scalar": (L.f_int_array, (_U, 0.7)),
    "numpy_ufuncs_on_scalars": (L.f_np_ufuncs, (_U, 0.7)),
    "atomic_add_cloud_in_cell": (L.f_atomic_deposit, (np.array([0.15, 0.4, 1.3, 1.5, 2.3]),
                                                      np.array([1.0, 0.5, 0.7, 0.2, 0.9]))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(PROBES_OK))
def test_construct_jvp(backend, name):
    f, args = PROBES_OK[name]
    with dualgpu.using_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_jvp(f, args)


def test_const_memory_on_cudasim():
    with dualgpu.using_backend("cudasim"):
        check_jvp(L.f_const, (_U, 0.7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_math_on_dual_parameter_says_what_to_do(backend):
    """math.sqrt(param) in host code cannot see the dual: the error must say so (documented)."""
    with dualgpu.using_backend(backend), pytest.raises(TypeError, match="drop the partials"):
        dualgpu.jvp(L.f_host_math_sqrt, (_U, 2.0), (None, 1.0))


def test_shared_memory_tile_with_duals_on_cpu():
    with dualgpu.using_backend("cpu"):
        check_jvp(L.f_shared_tile, (_U, 0.7))


# --- failures: minimal reproducers (xfail strict) --------------------------------------------

def _xfail(reason):
    return pytest.mark.xfail(strict=True, reason=reason)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_of_dual_in_kernel_error_names_float(backend):
    out = dual_array(np.zeros(7), lanes=1)
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError, match=r"float\(Dual\)"):
        L.p_float_cast[1, 8](_U, out, Dual(0.7, [1.0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernel_forall(backend):
    with dualgpu.using_backend(backend):
        check_jvp(L.f_forall, (_U, 0.7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_streams_on_host_backends(backend):
    with dualgpu.using_backend(backend):
        check_jvp(L.f_stream, (_U, 0.7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_to_host_into_buffer(backend):
    """np.empty_like of a dual input is a DualArray (zero partials, same lanes) to copy into."""
    with dualgpu.using_backend(backend):
        check_jvp(L.f_copy_into, (_U, 0.7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_to_host_into_plain_buffer_differentiates(backend):
    """u plain, the parameter dual: copy_to_host into np.empty_like(u) cannot take the
    partials; refused with the fix by default, kept beside the buffer under the driver inside
    dualgpu.keep_host_buffers()."""
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError, match="keep_host_buffers"):
        dualgpu.jvp(L.f_copy_into, (_U, 0.7), (None, 1.0))
    _check_in_a(L.f_copy_into, backend)


def _check_in_a(f, backend):
    h = 1e-6
    with dualgpu.using_backend(backend), dualgpu.keep_host_buffers():
        value, tangent = dualgpu.jvp(f, (_U, 0.7), (None, 1.0))
        fd = (np.asarray(f(_U, 0.7 + h)) - np.asarray(f(_U, 0.7 - h))) / (2 * h)
    np.testing.assert_allclose(value, f(_U, 0.7), rtol=1e-12)
    assert np.abs(tangent).max() > 0
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_reduction_of_result(backend):
    with dualgpu.using_backend(backend):
        check_jvp(L.f_host_sum, (_U, 0.7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_float32_cast_of_parameter(backend):
    """np.float32(param) cannot keep the partials (numpy calls float()); the error names the
    documented way, dualgpu.float32(param), which works with and without the driver."""
    u32, a32 = _U.astype(np.float32), np.float32(0.7)
    with dualgpu.using_backend(backend):
        with pytest.raises(TypeError, match=r"dualgpu\.float32\(a\)"):
            dualgpu.jvp(L.f_host_float32_cast, (u32, a32), (None, np.float32(1.0)))
        check_jvp(L.f_host_float32_cast_documented, (u32, a32))
        plain = L.f_host_float32_cast_documented(u32, a32)
    assert plain.dtype == np.float32
    np.testing.assert_array_equal(plain, L.f_host_float32_cast(u32, a32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_output_array_under_the_driver(backend):
    """np.zeros_like(dual_array) is a DualArray with zero partials and the same lanes: a
    kernel storing into it under the driver gives the right Jacobian."""
    with dualgpu.using_backend(backend):
        check_jacobian(L.f_numpy_out, _U, 0.7, argnums=(0, 1), n_directions=2)
        jac = dualgpu.jacobian(L.f_numpy_out, _U, 0.7, argnums=0, progress=False)
    np.testing.assert_allclose(jac, np.diag(2 * 0.7 * _U), rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_objective_of_device_result(backend):
    """numpy on the result still in (simulated) device memory: copied to the host first."""
    with dualgpu.using_backend(backend):
        check_jvp(L.f_host_objective_of_device_result, (_U, 0.7))


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_output_array_with_plain_input_differentiates(backend):
    """u plain, the parameter dual: np.zeros_like(u) is a host numpy array that the kernel
    writes duals into: refused with the fix by default; inside dualgpu.keep_host_buffers()
    the driver keeps the partials beside it."""
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError, match="keep_host_buffers"):
        dualgpu.jvp(L.f_numpy_out, (_U, 0.7), (None, 1.0))
    _check_in_a(L.f_numpy_out, backend)


def test_shared_memory_tile_with_duals_on_cudasim():
    """A float shared tile of a dual launch is a dual tile (was an xfail reproducer)."""
    with dualgpu.using_backend("cudasim"):
        check_jvp(L.f_shared_tile, (_U, 0.7))


@pytest.mark.parametrize("backend", ["cudasim", "cpu"])
def test_shared_memory_tile_that_cannot_hold_duals_names_the_tile_and_line(backend):
    """Only a tile whose dtype cannot hold partials (float16) still refuses a dual (the cpu
    backend said "DualArray: dtype must be float32, ...", naming neither; unseen round)."""
    import block_kernels_extra as X

    u = dual_array(_U[:8], lanes=1)
    out = dual_array(np.zeros(8), lanes=1)
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError) as info:
        X.half_tile[1, 8](u, out)
    message = str(info.value)
    assert "into tile (at " in message and "block_kernels_extra.py:" in message
    assert "float32 or float64" in message or "cannot hold partials" in message


def test_const_memory_on_cpu():
    with dualgpu.using_backend("cpu"):
        check_jvp(L.f_const, (_U, 0.7))


def test_numpy_output_array_under_sparsity_detection():
    """np.zeros_like of a structural tracer is a tracer: detection sees the kernel's pattern."""
    with dualgpu.using_backend("cpu"):
        jac = dualgpu.jacobian(lambda u: L.f_numpy_out(u, 0.7), _U, sparsity="detect")
    np.testing.assert_allclose(jac.toarray(), np.diag(2 * 0.7 * _U), rtol=1e-14)
