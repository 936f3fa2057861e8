"""numba.cuda language features (``kernels_language_features.py``), ported by the import line.

For each simulation: the plain run equals the unported code (numba's CUDA simulator with the
kernels rebound to numba.cuda; ``cuda.vectorize``, which numba's simulator lacks, against
NumPy), and Jacobians w.r.t. every float argument agree with central differences on
``cudasim`` (all) and ``cpu`` (the constructs the cpu backend compiles differently: device
functions with keywords, slices and views, rounding, dual loop conditions, float32 mixes...);
a subset of the dual kernels compiles to PTX. Then regression tests for what failed and was
fixed: ``round(dual, n)`` and ``for v in dual_array`` in compiled code, keyword arguments to
device functions on cudasim, ``to_device`` of a transposed DualArray, numba.cuda's host API
(events, pinned/mapped/managed memory) and ``cuda.vectorize`` without a GPU,
``math.remainder``/``math.modf`` on the cpu backend; and the errors for what cannot take a
dual (``cuda.guvectorize`` off the GPU, a math function without a rule, ``cuda.libdevice``).
"""
import math
import warnings

import numba
import numba.cuda
import numpy as np
import pytest

import dualgpu
import kernels_language_features as K
from dualgpu import Dual, cuda, dual_array
from dualgpu.backends.gpu import kernel as gpu
from dualgpu.testing import check_jacobian
from dualgpu.backends.common.rebind import rebind
from unported import run_unported

_RNG = np.random.default_rng(23)
U8 = np.linspace(0.15, 0.95, 8) + 0.01 * _RNG.random(8)
X5 = np.array([0.9, -0.4, 0.3, 1.2, -1.1])
Y5 = np.array([0.2, 0.8, -0.7, 0.5, -0.3])
SMOOTH = np.sin(np.linspace(0, 3, 10)) + 0.3
STEP = np.where(np.arange(12) < 6, 1.0, 0.2) + 0.05 * np.sin(np.arange(12.0))
GROW = np.array([0.5, 2.0, 0.8, 3.0, 0.1, 1.5])
Q = np.stack([1.0 + 0.3 * _RNG.random(6), 0.2 * _RNG.standard_normal(6),
              2.5 + _RNG.random(6)], 1)
A63 = _RNG.random((6, 3))
W3 = np.array([0.25, 0.5, 0.25])
U11 = np.cos(np.linspace(0, 2, 11))
A34, B34 = _RNG.random((3, 4)), _RNG.random((4, 3))
PERM = np.array([3, 0, 5, 1, 7, 2, 6, 4], np.int32)
MASK = np.array([1, 1, 0, 1, 1, 0, 1, 1, 1, 1], np.bool_)
COUNTS = np.array([1, 2, 3, 2, 1, 2, 3, 2, 1, 2], np.int64)
C32 = np.array([1, 2, 3, 2, 1, 4], np.int32)
U2D = _RNG.random((5, 6))
V32 = np.linspace(-1.0, 1.5, 9).astype(np.float32)
M32 = (0.5 + _RNG.random(6)).astype(np.float32)
U3D = _RNG.random((2, 6, 3))
F32 = np.float32

# name: (simulation, arguments, run on cpu too)
SIMS = {
    "polar_atan2_hypot_fmod": (K.simulate_swirl, (X5, Y5, 1.3), False),
    "special_erf_log1p": (K.simulate_soft, (U8 - 0.5, 1.7), False),
    "powers_int_var_dual_exp": (K.simulate_powers, (U8, 1.3), False),
    "polynomial_len_loop_power": (K.simulate_polynomial, (U8, np.array([0.5, -1.0, 2.0, 0.3])),
                                  False),
    "superbee_min_max_abs": (K.simulate_limited, (STEP, 0.4), False),
    "isinf_isnan_guards": (K.simulate_guarded, (GROW, 1.1, 7.0), False),
    "const_table_floor_ceil_round": (K.simulate_lookup, (U8, 5.3), True),
    "newton_while_dual_condition": (K.simulate_cubic, (U8 * 3, 0.7), False),
    "while_dual_bound": (K.simulate_decay, (U8, 0.8, 0.5), False),
    "break_continue": (K.simulate_neighbours, (np.array([0.0, 0.45, 1.0, 1.7, 2.05, 3.6]), 0.6),
                       False),
    "device_kwargs_nested_tuples": (K.simulate_euler, (Q, 1.4), True),
    "device_array_row_slice_args": (K.simulate_slice_stencil, (U8, np.vstack([A63, A63[:2]]),
                                                               W3), True),
    "strided_reversed_interior_views": (K.simulate_views, (U11[:10], 0.7), True),
    "transposed_fortran_inputs": (K.simulate_transposed, (A34, B34, 0.6), True),
    "int32_gather_scatter": (K.simulate_permute, (U8, 1.5, PERM), False),
    "bool_mask_int_counts": (K.simulate_masked, (SMOOTH, 0.6, MASK, COUNTS), False),
    "const_table_2d": (K.simulate_smooth, (U2D, 0.5), False),
    "shape_loops_moments": (K.simulate_moments, (A63, 1.5), False),
    "gridsize_stride_tuples": (K.simulate_grid_stride, (U11, 0.9), False),
    "laneid_warpsize_threadfence": (K.simulate_lanes, (np.linspace(0, 1, 40), 0.7), False),
    "several_bare_returns": (K.simulate_piecewise, (np.linspace(0.05, 0.95, 10), 1.2), False),
    "streams_forall_shared0": (K.simulate_streamed, (SMOOTH, 0.2), False),
    "events_pinned_buffers": (K.simulate_timed_pinned, (SMOOTH, 0.2), True),
    "pinned_context_defer_cleanup": (K.simulate_pinned_context, (SMOOTH, 0.2), False),
    "vectorize": (K.simulate_vectorized, (U8 - 0.5, 2.0), True),
    "vectorize_f32": (K.simulate_vectorized, ((U8 - 0.5).astype(F32), F32(2.0)), False),
    "float32_literals_casts": (K.simulate_drag_f32, (V32, F32(0.3)), True),
    "float32_state_int32_counts": (K.simulate_mean_field_f32, (M32, F32(0.4), C32), False),
    "grid3_noncontiguous_view": (K.simulate_decay_3d, (U3D, 0.3), False),
    "bool_flags_int_sign": (K.simulate_flags, (np.sin(np.linspace(0, 6, 9)) + 0.1, 0.3), False),
    "remainder_modf_plain": (K.simulate_wrapped_phase, (np.array([-500, -90, 0, 45, 170, 190,
                                                                  725]), 1.3), True),
}
CASES = [pytest.param(name, "cudasim", id=f"{name}-cudasim") for name in SIMS] + [
    pytest.param(name, "cpu", id=f"{name}-cpu") for name, s in SIMS.items() if s[2]]


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _float_argnums(args):
    return tuple(k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f")


def _logistic_reference(u, k):
    return 1.0 / (1.0 + np.exp(-k * u))


def _original(kernel):
    """``unported.original``, but device functions also take keyword and default arguments.

    numba.cuda compiles ``f(a, gamma=g)`` for a device function (checked with compile_ptx);
    numba's simulator refuses the keyword, so here the arguments are bound first.
    """
    import inspect

    from numba.cuda import simulator

    def unport(value):
        if value is dualgpu.cuda:
            return numba.cuda
        if getattr(value, "__dualgpu_device__", False) is True:
            fake = simulator.jit(device=True)(rebind(value.py_func, unport))
            signature = inspect.signature(value.py_func)

            def device(*args, **kwargs):
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                return fake(*bound.args)
            return device
        return value

    return simulator.jit(rebind(kernel.py_func, unport))


@pytest.fixture(scope="module")
def unported_results():
    """Each simulation run by the unported code: numba's simulator, numba.cuda allocation."""
    return run_unported(K, SIMS, unport=_original, logistic=_logistic_reference)


@pytest.mark.parametrize("name, backend", CASES)
def test_plain_run_equals_unported(name, backend, unported_results):
    f, args, _ = SIMS[name]
    with dualgpu.using_backend(backend):
        got = _tuple(f(*args))
    for g, e in zip(got, unported_results[name]):
        assert type(g) is np.ndarray and g.dtype == e.dtype, (type(g), g.dtype, e.dtype)
        if name.startswith("vectorize"):  # NumPy's exp is not the C library's in the last bit
            np.testing.assert_allclose(g, e, rtol=1e-15 if e.dtype == np.float64 else 1e-6)
        else:
            np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name, backend", CASES)
def test_jacobian_matches_differences(name, backend):
    f, args, _ = SIMS[name]
    f32 = any(np.asarray(a).dtype == np.float32 for a in args)
    with dualgpu.using_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("ignore", dualgpu.errors.ChunkSizeWarning)
        check_jacobian(f, *args, argnums=_float_argnums(args), n_directions=2,
                       **({"rtol": 2e-3} if f32 else {}))


# --- the dual kernels compile for the GPU -------------------------------------------------

def _dual_launch_types(f, args):
    """{py_func: argument types} of every kernel launch of a 2-lane jvp of ``f`` on the cpu.

    The launches are recorded, not run: their types are all PTX needs, and the cpu runs are
    tested above (a launch compiles its kernel for the cpu first).
    """
    from dualgpu.backends.cpu.kernel import CpuKernel

    seen, launch = {}, CpuKernel.launch

    def record(self, griddim, blockdim, launch_args, sharedmem=0):
        seen.setdefault(self.py_func, tuple(numba.typeof(a) for a in launch_args))

    tangents = tuple(np.ones_like(a) if np.asarray(a).dtype.kind == "f" else None for a in args)
    CpuKernel.launch = record
    try:
        with dualgpu.using_backend("cpu"), warnings.catch_warnings():
            warnings.simplefilter("ignore", dualgpu.errors.ChunkSizeWarning)
            dualgpu.jvp_batch(f, args, tuple(None if t is None else np.stack([t, t])
                                             for t in tangents))
    finally:
        CpuKernel.launch = launch
    return seen


#: constructs whose dual lowering is new to the PTX tests (all 27 kernels and the vectorized
#: one were compiled once; these 4 are kept to hold the file near a minute on 2 cores)
PTX_CASES = ("device_kwargs_nested_tuples", "device_array_row_slice_args",
             "const_table_floor_ceil_round", "vectorize")


@pytest.mark.parametrize("name", PTX_CASES)
def test_dual_kernels_compile_to_ptx(offline_ptx, name):
    f, args, _ = SIMS[name]
    launches = _dual_launch_types(f, args)
    assert launches
    for py_func, argtypes in launches.items():
        ptx, _ = numba.cuda.compile_ptx(gpu.prepare_function(py_func, 2), argtypes,
                                        cc=offline_ptx)
        assert ".entry" in ptx


# --- fixed here: regression tests ---------------------------------------------------------

def test_round_with_ndigits_of_a_dual_in_compiled_code():
    """round(x, 1) of a dual failed to compile (numba typing error); it is a float of the
    value with zero partials, as round(float, n) is a float (the simulator did this)."""
    from numba import njit

    @njit
    def rounded(x):
        return round(x, 1) + round(x)

    d = Dual(2.345, [1.0, 2.0])
    got = rounded(d)
    assert got == round(2.345, 1) + 2 and type(got) is float


def test_iterating_dual_arrays_in_compiled_code():
    """``for v in row`` over a DualArray had no getiter; rows of a 2-D one yield views. The
    iterator type of a 1-D DualArray and of a row view (strided partials) must not share
    a compiled type (they did once: the row's partials were read as contiguous)."""
    from numba import njit

    @njit
    def sum_squares(a):
        acc = 0.0
        for v in a:
            acc += v * v
        return acc

    @njit
    def sum_rows(a):
        acc = 0.0
        for row in a:
            for v in row:
                acc += 2.0 * v
        return acc

    a = dual_array(np.arange(4.0), lanes=2)
    a.partials[0] = 1.0
    np.testing.assert_array_equal(sum_squares(a).partials, [12.0, 0.0])
    b = dual_array(np.arange(6.0).reshape(2, 3), lanes=2)
    b.partials[1] = np.arange(6.0).reshape(2, 3)
    got = sum_rows(b)
    assert got.value == 30.0
    np.testing.assert_array_equal(got.partials, [0.0, 30.0])


def test_to_device_of_a_transposed_dual_array_on_cudasim():
    """a.T of a DualArray has Fortran-order values but lane-major partials that are
    neither C nor F contiguous: numba's (simulated) to_device refused them."""
    a = dual_array(_RNG.random((3, 4)), lanes=2)
    a.partials[:] = _RNG.random((2, 3, 4))
    with dualgpu.using_backend("cudasim"):
        d = dualgpu.cuda.to_device(a.T).copy_to_host()
    np.testing.assert_array_equal(d.values, a.values.T)
    np.testing.assert_array_equal(d.partials, np.transpose(a.partials, (0, 2, 1)))


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_host_api_without_a_gpu(backend):
    """events, pinned/mapped/managed arrays and their context managers asked numba.cuda's
    driver (CudaSupportError) on the cpu and cudasim backends."""
    cuda = dualgpu.cuda
    with dualgpu.using_backend(backend):
        start, stop = cuda.event(), cuda.event(timing=True)
        start.record()
        mapped = cuda.mapped_array(8)
        mapped[:] = U8
        managed = cuda.managed_array(8)
        K.axpy[1, 8](mapped, mapped, managed, 2.0)
        stop.record()
        stop.synchronize()
        assert cuda.event_elapsed_time(start, stop) >= 0.0 and start.elapsed_time(stop) >= 0
        np.testing.assert_array_equal(np.asarray(managed), 3.0 * U8)
        with cuda.mapped(managed) as view:
            assert view is managed
        with pytest.raises(dualgpu.DualgpuError, match="never recorded"):
            cuda.event_elapsed_time(cuda.event(), stop)
        # under the driver, float host buffers hold duals like device_array's
        out, tangent = dualgpu.jvp(lambda u: K.simulate_timed_pinned(u, 0.2), (SMOOTH,),
                                   (np.ones_like(SMOOTH),))
    assert type(out) is np.ndarray and np.all(np.isfinite(tangent))


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_vectorize_signatures_broadcasting_and_device_arrays(backend):
    """numba.cuda.vectorize compiled for a GPU at decoration (CudaSupportError without one)."""
    with dualgpu.using_backend(backend):
        grid = K.logistic(U8[:, None], U8[None, :])          # broadcasting
        np.testing.assert_allclose(grid, _logistic_reference(U8[:, None], U8[None, :]),
                                   rtol=1e-15)
        d = K.logistic(dualgpu.cuda.to_device(U8), 2.0)      # a device array in, one out
        assert hasattr(d, "copy_to_host")
        np.testing.assert_allclose(d.copy_to_host(), _logistic_reference(U8, 2.0), rtol=1e-15)
        # numba.cuda's ufuncs cast no arrays: a float32 array with a float64 one is refused
        with pytest.raises(TypeError, match="no signature takes.*casting='no'"):
            K.logistic(U8.astype(np.float32), U8)
        y = K.logistic(U8, Dual(2.0, [1.0]))                 # a dual scalar
        np.testing.assert_allclose(y.partials[0], U8 * np.exp(-2 * U8) / (1 + np.exp(-2 * U8)) ** 2,
                                   rtol=1e-13)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_guvectorize_says_how_to_port_it(backend):
    @dualgpu.cuda.guvectorize(["void(float64[:], float64, float64[:])"], "(n),()->(n)")
    def scale_rows(x, a, out):
        for i in range(x.shape[0]):
            out[i] = a * x[i]

    with dualgpu.using_backend(backend), pytest.raises(
            dualgpu.UnsupportedFeatureError, match=r"scale_rows .*Write it as a @cuda.jit kernel"):
        scale_rows(U8, 2.0)


# --- what cannot take a dual says so -------------------------------------------------------

@cuda.jit
def _log_gamma(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = math.lgamma(u[i]) + 0.1 * math.gamma(u[i])


def _simulate_log_gamma(u):
    d_u = cuda.to_device(u)
    out = cuda.device_array_like(d_u)
    _log_gamma[1, u.shape[0]](d_u, out)
    return out.copy_to_host()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_lgamma_and_gamma_take_duals(backend, dtype):
    """numba.cuda has math.lgamma and math.gamma: their derivatives (digamma, dualgpu's own)
    against central differences and the analytic values, below 0 too (between the poles)."""
    u = np.array([-2.5, -0.7, 0.3, 1.0, 1.4616, 2.5, 7.0, 12.5], dtype)
    with dualgpu.using_backend(backend):
        jac = dualgpu.jacobian(_simulate_log_gamma, u, progress=False)
        assert np.array_equal(np.diag(np.diag(jac)), jac)
        check_jacobian(_simulate_log_gamma, u,
                       **({"rtol": 2e-3, "atol": 1e-3} if dtype == np.float32 else {}))
    # digamma(x) (1 + 0.1 gamma(x)): psi(1) = -Euler's gamma, psi(2.5) = 0.7031566406452432
    assert np.diag(jac)[3] == pytest.approx(-0.5772156649015329 * 1.1,
                                            rel=1e-6 if dtype == np.float32 else 1e-13)
    assert np.diag(jac)[5] == pytest.approx(0.7031566406452432 * (1 + 0.1 * math.gamma(2.5)),
                                            rel=1e-6 if dtype == np.float32 else 1e-13)


@cuda.jit
def _next_after(u, out):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = math.nextafter(u[i], 2.0)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_function_without_a_rule_names_itself(backend):
    """numba.cuda has math.nextafter; dualgpu has no rule for it: the error says how to add
    one, with a derivative per argument."""
    u = dual_array(U8 + 1.0, lanes=1)
    out = dual_array(np.zeros(8), lanes=1)
    with dualgpu.using_backend(backend), pytest.raises(
            dualgpu.MissingRuleError,
            match=r"math\.nextafter has no derivative rule.*BINARY_RULES.*rules\.py"):
        _next_after[1, 8](u, out)


def test_libdevice_function_given_a_dual_names_itself(offline_ptx):
    """cuda.libdevice.erfinvf(dual) (no formula in math) was numba's typing error on the cuda
    backend; libdevice's float functions take duals (tests/porting/test_libdevice.py)."""
    from numba import types

    from dualgpu.compiled.arrays import dual_array_type

    @dualgpu.jit
    def libdevice_erfinv(u, out):
        i = dualgpu.cuda.grid(1)
        if i < u.shape[0]:
            out[i] = dualgpu.cuda.libdevice.erfinvf(u[i])

    t = dual_array_type(types.float32, 1, 2)
    with pytest.raises(dualgpu.UnsupportedFeatureError,
                       match=r"cuda\.libdevice\.erfinvf cannot take a Dual.*math has no erfinv"):
        numba.cuda.compile_ptx(gpu.prepare_function(libdevice_erfinv.py_func, 2), (t, t),
                               cc=offline_ptx)


# --- the unported kernels are valid numba.cuda ----------------------------------------------

def _plain_launch_types():
    """{kernel py_func: argument types} of every kernel launch of the plain simulations."""
    from dualgpu.backends.cudasim.kernel import SimulatorKernel

    kernels = {getattr(K, n).py_func for n in dir(K)
               if getattr(getattr(K, n), "__dualgpu_kernel__", 0)}
    seen, launch = {}, SimulatorKernel.launch

    def record(self, griddim, blockdim, stream, sharedmem, args):
        if self.py_func in kernels:
            seen.setdefault(self.py_func, tuple(
                numba.typeof(getattr(a, "_ary", a)) for a in args))
        return launch(self, griddim, blockdim, stream, sharedmem, args)

    SimulatorKernel.launch = record
    try:
        with dualgpu.using_backend("cudasim"):
            for f, args, _ in SIMS.values():
                f(*args)
    finally:
        SimulatorKernel.launch = launch
    assert len(seen) == len(kernels)  # each kernel of the module is launched
    return seen


def test_unported_kernels_compile_for_the_gpu(offline_ptx):
    """Each kernel with ``cuda`` meaning numba.cuda compiles to PTX with its launches' types:
    the module is numba.cuda code (what numba.cuda refuses is not ours to support)."""
    def unport(value):
        if value is cuda:
            return numba.cuda
        if getattr(value, "__dualgpu_device__", False) is True:
            return numba.cuda.jit(device=True)(rebind(value.py_func, unport))
        return value

    for py_func, argtypes in _plain_launch_types().items():
        ptx, _ = numba.cuda.compile_ptx(rebind(py_func, unport), argtypes, cc=offline_ptx)
        assert ".entry" in ptx, py_func.__name__

