"""Device functions called with ``*args`` (issue 44: a seismology code).

``out[i] = wave(*coefficients)`` with a tuple of coefficients (numba.cuda accepts it) failed on
the cpu backend, plain and dual, with numba's ``UnsupportedError: Calling a closure with *args
is unsupported`` from the generated launcher; cudasim ran it. With complex numbers and duals,
both backends differentiate (complex duals).
"""
import cmath
import math

import numpy as np
import pytest

import dualgpu
from dualgpu import cuda

BACKENDS = ["cpu", "cudasim"]


@cuda.jit(device=True)
def _wave(x, amplitude, k, phase):
    return amplitude * math.sin(k * x + phase)


@cuda.jit
def _sample(x, out, coefficients):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = _wave(x[i], *coefficients) + _wave(*(x[i], 1.0, 2.0, 0.0))


@cuda.jit(device=True)
def _rotate(z, x):
    return z * x


@cuda.jit
def _complex_sample(x, out, coefficients):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = _rotate(*coefficients, x[i]).real


def _simulate(x, amplitude, k):
    d = cuda.to_device(x)
    out = cuda.device_array_like(d)
    _sample[2, 8](d, out, (amplitude, k, 0.3))
    return out.copy_to_host()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_star_call_runs_and_differentiates(backend, dtype):
    x = np.linspace(0.0, 2.0, 13).astype(dtype)
    amplitude, k = dtype(1.3), dtype(0.8)
    with dualgpu.using_backend(backend):
        plain = _simulate(x, amplitude, k)
        jac = dualgpu.jacobian(_simulate, x, amplitude, k, argnums=(1, 2))
        h = 1e-6 if dtype == np.float64 else 1e-2
        x64 = x.astype(np.float64)
        fd_a = (_simulate(x64, 1.3 + h, 0.8) - _simulate(x64, 1.3 - h, 0.8)) / (2 * h)
        fd_k = (_simulate(x64, 1.3, 0.8 + h) - _simulate(x64, 1.3, 0.8 - h)) / (2 * h)
    expected = 1.3 * np.sin(0.8 * x64 + 0.3) + np.sin(2.0 * x64)
    rtol = 1e-7 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(plain, expected, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(np.asarray(jac[0], np.float64).reshape(-1), fd_a, rtol=rtol,
                               atol=rtol)
    np.testing.assert_allclose(np.asarray(jac[1], np.float64).reshape(-1), fd_k, rtol=rtol,
                               atol=rtol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_star_call_with_complex_numbers(backend):
    x = np.linspace(0.0, 1.0, 4)
    with dualgpu.using_backend(backend):
        out = np.zeros(4)
        _complex_sample[1, 4](x, out, (cmath.exp(0.5j),))
        np.testing.assert_allclose(out, math.cos(0.5) * x)
        u = dualgpu.dual_array(x, np.ones((1, 4)))
        out = cuda.device_array_like(u)  # complex duals on both backends: d/dx cos(0.5) x
        _complex_sample[1, 4](u, out, (cmath.exp(0.5j),))
        result = out.copy_to_host()
        np.testing.assert_allclose(result.values, math.cos(0.5) * x)
        np.testing.assert_allclose(result.partials[0], math.cos(0.5))
