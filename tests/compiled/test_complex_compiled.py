"""Complex duals in compiled code: every complex rule on the njit and cpu paths against central
differences, complex64 and complex128, and every one compiled to PTX.

One kernel per dtype and path holds every case (tests/fixtures/complex_compiled_cases.py): the
unary rules on complex duals (and the cmath ones on real duals), the binary rules with every
pairing of a complex operand with a dual, the in-place operators and numpy forms. Each case's
lanes are compared with a complex128 central difference along its tangent
(tests/fixtures/complex_harness.py); its value with numpy's.
"""
import cmath
import importlib.util
import os
import sys

import numpy as np
import pytest
from numba import njit, types

import dualgpu
from complex_compiled_cases import CUDA_MISSING, cases, inputs, kernel_source
from complex_harness import NUMPY, assert_tangent_close, central_difference

DTYPES = (np.complex64, np.complex128)
LANES = 2
CASES = cases()
#: DUALGPU_TEST_CASES=all runs njit and cpu in both dtypes and every PTX case in both; by
#: default each compiled CPU path runs one dtype (njit complex64, cpu complex128: both paths
#: share every overload, the cpu backend compiles its kernels with njit), about 20 s each, and
#: PTX compiles every rule in both dtypes, its further forms (kinds, in-place, numpy) split
#: between the two (tests/fixtures/complex_compiled_cases.py).
FULL_PRODUCT = os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all"
PATH_DTYPES = {"njit": DTYPES if FULL_PRODUCT else DTYPES[:1],
               "cpu": DTYPES if FULL_PRODUCT else DTYPES[1:], "PTX": DTYPES}
PTX_CASES = {np.dtype(d): cases(cuda=True, sample=None if FULL_PRODUCT else k)
             for k, d in enumerate(DTYPES)}
#: the cases each path checks, per dtype (the coverage table counts them: tests/rule_coverage.py)
PATH_CASES = {"njit": {np.dtype(d): CASES for d in DTYPES},
              "cpu": {np.dtype(d): CASES for d in DTYPES}, "PTX": PTX_CASES}


def _kernel_module(tmp_path_factory, case_list):
    """A module file holding the kernel as a ``dualgpu.cuda`` kernel (the cpu backend reads
    its source)."""
    folder = tmp_path_factory.mktemp("complex_kernel")
    path = folder / "complex_rules_kernel.py"
    path.write_text("import cmath\n\nimport numpy as np\n\nfrom dualgpu import cuda\n\n\n"
                    "@cuda.jit\n" + kernel_source(case_list, cuda_kernel=True))
    spec = importlib.util.spec_from_file_location(f"complex_rules_kernel_{folder.name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cpu_kernel(tmp_path_factory):
    return _kernel_module(tmp_path_factory, CASES).kernel


def _njit_kernel():
    import cmath

    ns = {"np": np, "cmath": cmath}
    exec(compile(kernel_source(CASES, cuda_kernel=False), "<complex rules>", "exec"), ns)
    return njit(ns["kernel"])


def _check(out, drawn, dtype, path):
    dtype = np.dtype(dtype)
    for k, ((key, kinds, form), operands) in enumerate(zip(CASES, drawn)):
        values = [v for v, _ in operands]
        what = f"{path} {form} {key}{kinds} {dtype}"
        for lane in range(LANES):
            tangents = [None if t is None else t[lane] for _, t in operands]
            expected = central_difference(NUMPY[key], [np.asarray(v) for v in values],
                                          [None if t is None else np.asarray(t) for t in
                                           tangents])
            assert_tangent_close(out.partials[lane, k], expected, dtype, what)
        with np.errstate(all="ignore"):
            plain = NUMPY[key](*[np.asarray(v) for v in values])
        np.testing.assert_allclose(out.values[k], plain, rtol=2e-6 if dtype == np.complex64
                                   else 1e-14, atol=1e-6 if dtype == np.complex64 else 1e-14,
                                   err_msg=what)
        assert out.values.dtype == dtype


@pytest.mark.parametrize("dtype", PATH_DTYPES["njit"])
def test_every_complex_rule_in_njit_code(dtype):
    arrays, drawn = inputs(CASES, dtype, LANES)
    _njit_kernel()(*arrays)
    _check(arrays[-1], drawn, dtype, "njit")


@pytest.mark.parametrize("dtype", PATH_DTYPES["cpu"])
def test_every_complex_rule_in_a_cpu_backend_kernel(cpu_kernel, dtype):
    arrays, drawn = inputs(CASES, dtype, LANES)
    with dualgpu.using_backend("cpu"):
        cpu_kernel[1, 1](*arrays)
    _check(arrays[-1], drawn, dtype, "cpu")


# --- PTX ---------------------------------------------------------------------------------

def _ptx_signature(dtype, lanes):
    from dualgpu.compiled.types import dual_array_type

    complex_ = types.complex64 if dtype == np.complex64 else types.complex128
    real = types.float32 if dtype == np.complex64 else types.float64
    c, r = dual_array_type(complex_, 1, lanes), dual_array_type(real, 1, lanes)
    return (c, c, r, r, types.Array(real, 1, "C"), types.Array(complex_, 1, "C"), c)


@pytest.mark.parametrize("dtype", PATH_DTYPES["PTX"])
def test_every_complex_rule_compiles_to_ptx(offline_ptx, tmp_path_factory, dtype):
    from numba import cuda

    from dualgpu.backends.gpu.kernel import prepare_function

    kernel = _kernel_module(tmp_path_factory, PTX_CASES[np.dtype(dtype)]).kernel
    ptx, _ = cuda.compile_ptx(prepare_function(kernel.py_func, LANES),
                              _ptx_signature(dtype, LANES), cc=offline_ptx)
    assert ".entry" in ptx
    assert {key for key, _, _ in PTX_CASES[np.dtype(dtype)]} == {
        key for key, _, _ in CASES if key not in CUDA_MISSING}  # every rule in this dtype


def test_numpy_only_rules_name_the_fix_in_cuda_code(offline_ptx, tmp_path_factory):
    """numba.cuda has no complex np.expm1 (nor log1p, square, reciprocal): the refusal says
    so and names the cmath form (plain code would not compile either)."""
    from numba import cuda
    from numba.core.errors import TypingError

    from dualgpu.backends.gpu.kernel import prepare_function

    missing = [c for c in CASES if c[0] in CUDA_MISSING and c[1] == ("c",)]
    assert len(missing) == len(CUDA_MISSING)
    kernel = _kernel_module(tmp_path_factory, missing[:1]).kernel
    with pytest.raises(TypingError, match=r"numba.cuda has no complex numpy.expm1.*Fix"):
        cuda.compile_ptx(prepare_function(kernel.py_func, LANES),
                         _ptx_signature(np.complex128, LANES), cc=offline_ptx)


# --- singular points, refusals ---------------------------------------------------------------

def test_derivative_factors_never_raise_at_singular_points():
    """numba's complex division raises at 0 whatever the error model; a factor gives
    infinities instead (NaN lanes, as the host's complex dual), while plain division by a
    complex zero raises as plain compiled code does."""
    import cmath

    zero = dualgpu.Dual(0j, [1.0 + 0j, 0j])
    for function in (njit(lambda z: cmath.sqrt(z)), njit(lambda z: cmath.log(z)),
                     njit(lambda z: z ** 0.5), njit(lambda z: np.reciprocal(z))):
        assert not np.isfinite(function(zero).partials[0])
    host = np.sqrt(zero)
    compiled = njit(lambda z: cmath.sqrt(z))(zero)
    np.testing.assert_array_equal(np.isnan(compiled.partials), np.isnan(host.partials))
    with pytest.raises(ZeroDivisionError):
        njit(lambda z: 1.0 / z)(zero)  # the primal, as in plain compiled code


def test_ordering_and_mixed_lanes_are_refused_in_njit_code():
    z = dualgpu.Dual(1j, [1.0 + 0j])
    with pytest.raises(TypeError, match=r"orders complex numbers.*Fix: compare a real"):
        njit(lambda z: z < 1.0)(z)
    with pytest.raises(TypeError, match=r"min\(.*orders complex numbers"):
        njit(lambda z: min(z, z))(z)
    from numba.core.errors import TypingError

    with pytest.raises(TypingError, match=r"different lane counts \[1, 2\]"):
        njit(lambda z, u: z * u)(z, dualgpu.Dual(0.5, [1.0, 0.0]))


def test_complex_duals_box_and_unbox_in_both_dtypes():
    for dtype in DTYPES:
        z = dualgpu.Dual(np.array(0.5 + 0.25j, dtype)[()], np.array([1j, 2.0], dtype))
        w = njit(lambda z: z)(z)
        assert w.dtype == dtype and w.value == z.value
        np.testing.assert_array_equal(w.partials, z.partials)
        d = njit(lambda z: abs(z))(z)  # a real dual of the matching float dtype
        assert d.dtype == np.dtype(dtype).type(0).real.dtype


def test_complex_numbers_with_second_order_duals_are_refused_by_name():
    import cmath

    from dualgpu.errors import UnsupportedFeatureError

    tagged = dualgpu.Dual(dualgpu.Dual(0.5, [1.0]), [dualgpu.Dual(1.0, [0.0])], tag=1)
    for function in (njit(lambda t: t * 1j), njit(lambda t: cmath.exp(t))):
        with pytest.raises(UnsupportedFeatureError, match=r"second-order \(tagged or nested\) "
                           r"dual; complex duals are first order only.*Fix"):
            function(tagged)


def test_complex_dual_launches_on_the_cuda_backend_are_refused_until_checked_on_a_gpu():
    """No GPU has run complex duals yet: a launch on the cuda backend says so (the check runs
    before the launch; called directly here, where no GPU is)."""
    from kernels_complex import phase_shift

    z = dualgpu.dual_array(np.ones(2, complex), lanes=1)
    with pytest.raises(dualgpu.DualgpuError, match=r"kernel phase_shift: complex arithmetic with "
                       r"a dual \(the complex dual argument psi on the cuda backend\).*not "
                       r"enabled before they are checked on a GPU"):
        phase_shift._check_duals((z, z, np.ones(2), 0.1), "cuda")
    phase_shift._check_duals((z, z, np.ones(2), 0.1), "cpu")  # runs there


@njit
def _accumulate(z, u, n):
    a = 0j  # a complex number that later holds a complex dual
    b = 0.0  # a float that later holds one
    for k in range(n):
        a += z * k
        b += z
        b *= u
    c = z if n > 2 else 1j  # branches: a complex dual and a complex constant
    return a, b, c


def test_accumulators_branches_and_cmath_helpers_in_njit_match_the_host():
    import cmath

    from dualgpu import dcmath

    z = dualgpu.Dual(0.3 + 0.2j, [1.0 + 0j, 0.5j])
    u = dualgpu.Dual(0.7, [1.0, 0.0])
    a, b, c = _accumulate(z, u, 3)
    host_a, host_b = 0j, 0.0
    for k in range(3):
        host_a, host_b = host_a + z * k, (host_b + z) * u
    for got, expected in ((a, host_a), (b, host_b), (c, z)):
        np.testing.assert_allclose(got.partials, expected.partials, rtol=1e-15)
    polar, rect, log, equal, finite = njit(lambda z, u: (
        cmath.polar(z), cmath.rect(u, u), cmath.log(z, u + 2), z == z, cmath.isfinite(z)))(z, u)
    for got, expected in zip(polar + (rect, log), dcmath.polar(z) + (
            dcmath.rect(u, u), dcmath.log(z, u + 2))):
        np.testing.assert_allclose(got.partials, expected.partials, rtol=1e-14)
    assert equal and finite


def test_an_eager_signature_njit_function_takes_complex_duals():
    import cmath

    function = njit("complex128(complex128)")(lambda z: cmath.exp(z) * z)
    z = dualgpu.Dual(0.3 + 0.2j, [1.0 + 0j])
    got = function(z)
    np.testing.assert_allclose(got.partials, np.exp(z.value) * (1 + z.value), rtol=1e-15)


@njit
def _array_operations(z, u):
    acc = 0j
    for v in z:  # iteration yields complex duals
        acc += v * v
    z[0] = u[0]  # a real dual: zero imaginary parts
    z[3] = 2j  # a complex constant: zero partials
    z[1:3] = z[2:4]  # slices move values and partials
    return acc


def test_complex_dual_arrays_iterate_slice_and_store_in_njit():
    z = dualgpu.DualArray(np.array([1 + 1j, 2j, 3.0, 1j]),
                          np.array([[1, 1j, 0, 2], [0, 1, 1j, 0]], complex))
    u = dualgpu.DualArray(np.array([0.5, 1.5]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    out = z.copy()
    acc = _array_operations(out, u)
    expected = z[0] * z[0] + z[1] * z[1] + z[2] * z[2] + z[3] * z[3]
    np.testing.assert_allclose(acc.partials, expected.partials, rtol=1e-15)
    np.testing.assert_array_equal(out.values, [0.5, 3.0, 2j, 2j])
    np.testing.assert_array_equal(out.partials, [[1, 0, 0, 0], [0, 1j, 0, 0]])
    assert out.dtype == np.complex128


# --- inverse functions on the branch their answer took -----------------------------------------

@dualgpu.cuda.jit
def _inverse_functions(z, out):
    i = dualgpu.cuda.grid(1)
    if i < z.shape[0]:
        out[0, i] = cmath.asin(z[i])
        out[1, i] = cmath.acos(z[i])
        out[2, i] = cmath.asinh(z[i])
        out[3, i] = cmath.acosh(z[i])


def _inverses(z):
    out = dualgpu.cuda.device_array((4, z.shape[0]), np.complex128)
    _inverse_functions[1, 16](dualgpu.cuda.to_device(z), out)
    return out.copy_to_host()


#: points on the cuts (either signed zero), off them where the real rules' principal roots are
#: the wrong ones (acosh with Re z < 0), and ordinary points
BRANCH_POINTS = np.array([complex(2.0, 0.0), complex(2.0, -0.0), complex(-3.0, 0.0),
                          complex(-3.0, -0.0), complex(0.0, 2.0), complex(-0.0, 2.0),
                          complex(0.0, -3.0), complex(-0.0, -3.0), -2.0 + 0.5j, -0.3 - 1.0j,
                          0.3 + 0.2j])


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_inverse_functions_differentiate_on_the_branch_of_their_answer(backend):
    """asin/acos (cuts on the real axis past +-1), asinh (the imaginary axis past +-i) and
    acosh: the derivative is 1 / cos(answer) and its kin, so it follows the side of the cut
    the signed zero chose (asin(2 + 0j): Snell's law past the critical angle) and the
    branch where Re z < 0 (acosh). The real rules' 1 / sqrt((1 - z) (1 + z)) flipped sign
    at those points. Reference: differences along the cut, with its signed zero kept."""
    z = BRANCH_POINTS
    h = 1e-6
    along = np.where(z.real == 0, 1j, 1.0)  # along the cut: the other part's zero is kept

    def moved(s):
        return np.array([complex(p.real + s, p.imag) if a == 1.0 else complex(p.real, p.imag + s)
                         for p, a in zip(z, along)])

    with dualgpu.using_backend(backend):
        _, tangent = dualgpu.jvp(_inverses, (z,), (np.ones_like(z),))
        fd = (_inverses(moved(h)) - _inverses(moved(-h))) / (2 * h) / along
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-9)
    # the host's numpy forms take the same rules
    host = np.arcsin(dualgpu.DualArray(z, np.ones((1, z.size), np.complex128)))
    np.testing.assert_allclose(host.partials[0], fd[0], rtol=1e-6, atol=1e-9)


@dualgpu.cuda.jit
def _scale_by(x, factor, out):
    i = dualgpu.cuda.grid(1)
    if i < x.shape[0]:
        out[i] = x[i] * factor * factor


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_a_complex_dual_scalar_is_a_kernel_argument(backend):
    """eps_re + 1j * eps_im of differentiated floats, passed to a kernel (the cpu launchers
    built every dual scalar as a real one: numba's typing error)."""
    def f(re, im):
        out = dualgpu.cuda.device_array(4, np.complex128)
        _scale_by[1, 16](dualgpu.cuda.to_device(np.arange(4.0)), re + 1j * im, out)
        return out.copy_to_host()

    with dualgpu.using_backend(backend):
        d_re, d_im = dualgpu.jacobian(f, 2.0, 0.1, argnums=(0, 1), progress=False)
    eps = 2.0 + 0.1j
    np.testing.assert_allclose(d_re, 2 * eps * np.arange(4.0), rtol=1e-14)
    np.testing.assert_allclose(d_im, 2j * eps * np.arange(4.0), rtol=1e-14)
