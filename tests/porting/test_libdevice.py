"""numba.cuda's libdevice functions in ported kernels (``dualgpu.compiled.libdevice``).

libdevice has no code off the GPU: on the cpu and cudasim backends its float functions run
as their formulas in ``math`` (plain values and duals alike), on the cuda backend a dual takes
the formula (checked by compiling to PTX). Values against numpy, derivatives against central
differences and analytic values; a function without a formula is refused by name.
"""
import math

import numpy as np
import pytest

import dualgpu
import kernels_libdevice as K
from dualgpu import DualgpuError, cuda

BACKENDS = ["cpu", "cudasim"]


def _expected(x, a):
    return (np.exp(x) + 1 / np.sqrt(x) + x * a + 1.0 + np.sin(x) * np.cos(x) + x ** a
            + np.arctan2(x, a) + np.cbrt(x - 1.0) + 10 ** (0.1 * x) + np.maximum(x, a) + x * a
            + np.log1p(x) + np.hypot(x, a) + np.array([math.gamma(v + 1) for v in x]))


def _run(kernel, u, a):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    kernel[1, 8](d, out, a)
    return out.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
def test_libdevice_float_functions_run_and_differentiate(backend):
    u, a = np.linspace(0.3, 2.1, 8), 0.7
    with dualgpu.using_backend(backend):
        np.testing.assert_allclose(_run(K.with_libdevice, u, a), _expected(u, a), rtol=1e-13)
        jac = dualgpu.jacobian(lambda v: _run(K.with_libdevice, v, a), u, progress=False)
        _, d_a = dualgpu.jvp(lambda b: _run(K.with_libdevice, u, b), (a,), (1.0,))
    h = 1e-6
    fd_u = (_expected(u + h, a) - _expected(u - h, a)) / (2 * h)
    fd_a = (_expected(u, a + h) - _expected(u, a - h)) / (2 * h)
    np.testing.assert_allclose(np.diag(jac), fd_u, rtol=1e-6)
    np.testing.assert_allclose(d_a, fd_a, rtol=1e-6)
    assert np.count_nonzero(jac - np.diag(np.diag(jac))) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_libdevice_float32_functions(backend):
    u, a = np.linspace(0.3, 1.6, 8).astype(np.float32), np.float32(1.5)
    x = u.astype(np.float64)
    expected = np.exp(x) + x ** -0.5 + x ** 1.5 + np.minimum(np.maximum(x, 0), 1) + x * x + 1.5
    expected += np.sin(x)
    slope = np.exp(x) - 0.5 * x ** -1.5 + 1.5 * x ** 0.5 + (x < 1) + 2 * x + np.cos(x)
    with dualgpu.using_backend(backend):
        np.testing.assert_allclose(_run(K.with_libdevice_f32, u, a), expected, rtol=1e-6)
        jac = dualgpu.jacobian(lambda v: _run(K.with_libdevice_f32, v, a), u, progress=False)
    assert jac.dtype == np.float32
    np.testing.assert_allclose(np.diag(jac), slope, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_libdevice_function_without_a_formula_is_refused_by_name(backend):
    u = np.linspace(-0.5, 0.5, 8)
    with dualgpu.using_backend(backend), pytest.raises(DualgpuError,
                                                       match=r"cuda\.libdevice\.erfinv"):
        d = cuda.to_device(u)
        out = cuda.device_array_like(d)
        K.erfinv_kernel[1, 8](d, out)


def test_libdevice_duals_compile_to_ptx(offline_ptx):
    from numba import cuda as numba_cuda
    from numba import types

    from dualgpu.backends.gpu import kernel as gpu
    from dualgpu.compiled.arrays import dual_array_type

    for kernel, dtype in ((K.with_libdevice, types.float64),
                          (K.with_libdevice_f32, types.float32)):
        arr = dual_array_type(dtype, 1, 2)
        ptx, _ = numba_cuda.compile_ptx(gpu.prepare_function(kernel.py_func, 2),
                                        (arr, arr, dtype), cc=offline_ptx)
        assert ".entry" in ptx


@pytest.mark.parametrize("backend", BACKENDS)
def test_libdevice_rounding_and_special_functions(backend):
    """rint (minimum image), floor, ceil, trunc, round, ldexp, normcdf, erfcx: plain values as
    numpy gives them (they were refused, plain arrays too; found by an unseen port), and
    derivatives that pass through the smooth terms only."""
    from scipy.special import erfcx, ndtr

    u, box = np.array([0.3, 1.7, 2.3, -0.4, 4.2, 5.6, -2.6, 0.05]), 2.0

    def expected(x):
        return (x - box * np.rint(x / box) + np.floor(x) + np.ceil(x) + np.trunc(-x)
                + np.where(x >= 0, np.floor(x + 0.5), -np.floor(0.5 - x)) + x * 8.0
                + ndtr(x - 1.0) + erfcx(0.1 * x))

    with dualgpu.using_backend(backend):
        ties = np.array([2.5, -0.5, 5.5, -2.5])  # round: half away from zero; rint: to even
        np.testing.assert_allclose(_run2(K.with_rounding, np.concatenate([ties, u[4:]]), box),
                                   expected(np.concatenate([ties, u[4:]])), rtol=1e-13)
        np.testing.assert_allclose(_run2(K.with_rounding, u, box), expected(u), rtol=1e-13)
        jac = dualgpu.jacobian(lambda v: _run2(K.with_rounding, v, box), u, progress=False)
        with pytest.raises(DualgpuError, match="rhypot"):
            _run2(K.misspelled, u, None)
    h = 1e-7
    np.testing.assert_allclose(np.diag(jac), (expected(u + h) - expected(u - h)) / (2 * h),
                               rtol=1e-6)


def _run2(kernel, u, extra):
    d = cuda.to_device(u)
    out = cuda.device_array_like(d)
    if extra is None:
        kernel[1, 8](d, out)
    else:
        kernel[1, 8](d, out, extra)
    return out.copy_to_host()


# float32 functions whose formulas hold constants or float(): 1.0 / math.sqrt(x) of a float32
# dual was a float64 dual, whose type spread through float32 kernels (53 float64 operations in
# a float32 N-body's dual PTX; found by an unseen round of GPU-path checks)
SINGLE = ["rsqrtf", "frsqrt_rn", "exp2f", "exp10f", "sinpif", "sincospif", "cbrtf", "rcbrtf",
          "normcdff", "fdimf", "saturatef", "ldexpf", "frcp_rn", "rintf", "roundf", "floorf"]


@pytest.mark.parametrize("name", SINGLE)
def test_libdevice_float32_formulas_stay_float32(name):
    from numba import njit

    from dualgpu.compiled.libdevice import CPU_FUNCTIONS, FORMULAS

    fn, arity = CPU_FUNCTIONS[name], FORMULAS[name][0]
    call = njit(lambda x: fn(x)) if arity == 1 else njit(lambda x, y: fn(x, y))
    second = () if arity == 1 else (np.int32(2) if name == "ldexpf" else np.float32(0.2),)
    x = np.float32(0.3)
    plain = call(x, *second)
    dual = call(dualgpu.Dual(x, np.ones(2, np.float32)), *second)
    for signature in call.nopython_signatures:
        result = signature.return_type
        for t in getattr(result, "types", (result,)):
            assert str(getattr(t, "dtype", t)) == "float32", (name, signature)
    values = [d.value if isinstance(d, dualgpu.Dual) else d
              for d in (dual if isinstance(dual, tuple) else (dual,))]
    assert np.array_equal(np.float32(values), np.float32(np.ravel(plain)))  # as the plain value
