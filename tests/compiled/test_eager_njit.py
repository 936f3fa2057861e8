"""Host ``@njit`` functions with eager signatures called with duals (issue 44).

``@njit("float64(float64)")`` called with a Dual gave numba's ``No matching definition``; as
eager ``cuda.jit`` signatures do, a dual call now compiles a dual specialisation of the same
function, and plain calls keep numba's signatures and conversions.
"""
import numpy as np
import pytest
from numba import njit

import dualgpu

BACKENDS = ["cpu", "cudasim"]


@njit("float64(float64)")
def _drag(v):
    return 0.5 * v * abs(v) + np.sin(v)


@njit(["float64(float64[:], float64)", "float32(float32[:], float32)"])
def _energy(u, k):
    total = 0.0
    for i in range(u.shape[0]):
        total += k * u[i] * u[i]
    return total


def _simulate(u, k):
    return _energy(u * u, k) + _drag(k)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_signature_function_differentiates(backend, dtype):
    u = np.linspace(0.2, 1.1, 6).astype(dtype)
    k = dtype(0.7)
    with dualgpu.using_backend(backend):
        jac = dualgpu.jacobian(_simulate, u, k, argnums=(0, 1))
    grad = np.concatenate([np.asarray(j, np.float64).reshape(-1) for j in jac])
    h = 1e-6
    u64, k64 = u.astype(np.float64), float(k)
    fd = []
    for i in range(u.size):
        e = np.zeros(u.size)
        e[i] = h
        fd.append((_simulate(u64 + e, k64) - _simulate(u64 - e, k64)) / (2 * h))
    fd.append((_simulate(u64, k64 + h) - _simulate(u64, k64 - h)) / (2 * h))
    rtol = 1e-7 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(grad, fd, rtol=rtol, atol=rtol * np.abs(fd).max())


def test_plain_calls_keep_numbas_signatures():
    assert _drag(2) == pytest.approx(2.0 + np.sin(2.0))  # an int converts, as before
    with pytest.raises(TypeError, match="No matching definition"):
        _drag("fast")  # not a dual: numba's own message
    before = len(_drag.nopython_signatures)
    d = _drag(dualgpu.Dual(2.0, [1.0, 0.0]))
    assert d.value == pytest.approx(2.0 + np.sin(2.0))
    assert list(d.partials) == pytest.approx([2.0 + np.cos(2.0), 0.0])
    _drag(dualgpu.Dual(3.0, [1.0, 0.0]))
    assert len(_drag.nopython_signatures) <= before + 1  # one dual specialisation per type


@njit("float64(float64)")
def _sign_times(v):
    return np.sign(v) * v


def test_a_dual_version_that_does_not_compile_names_the_function():
    with pytest.raises(Exception, match=r"_sign_times was compiled for its signature\(s\) "
                                        r"\(float64,\) -> float64 and called with duals"):
        _sign_times(dualgpu.Dual(2.0, [1.0]))
    assert _sign_times(-2.0) == 2.0
