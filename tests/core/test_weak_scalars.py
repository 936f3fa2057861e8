"""A Python float seeded by the driver is a *weak* dual (NEP 50): float32 host code computes in
float32 under the driver as it does in the plain run, instead of being promoted to float64."""
import numpy as np
import pytest

import dualgpu
from dualgpu import cuda

U = np.linspace(0.5, 1.5, 5).astype(np.float32)


def host_scale(a):
    return U * a + U * U / (1.0 + a)  # float32 array with a Python float: float32


def _fd(f, a, h):
    return (np.asarray(f(a + h), np.float64) - np.asarray(f(a - h), np.float64)) / (2 * h)


def test_host_numpy_stays_float32():
    a = 0.7
    plain = host_scale(a)
    assert plain.dtype == np.float32
    J = np.asarray(dualgpu.jacobian(host_scale, a, progress=False))
    assert J.dtype == np.float32, J.dtype
    np.testing.assert_allclose(J, U - U * U / (1.0 + a) ** 2, rtol=1e-6)
    np.testing.assert_allclose(J, _fd(host_scale, a, 1e-3), rtol=2e-3)
    value, tangent = dualgpu.jvp(host_scale, (a,), (1.0,))
    assert np.asarray(value).dtype == np.float32 and np.asarray(tangent).dtype == np.float32
    np.testing.assert_array_equal(value, plain)  # the value is the plain run's, bit for bit


def test_weak_dual_arithmetic_in_python():
    d = dualgpu.Dual(0.7, [1.0], weak=True)
    x = np.float32(2.0) * d + 1.0
    assert x.dtype == np.float32 and x.partials.dtype == np.float32
    strong = np.float32(2.0) * dualgpu.Dual(0.7, [1.0])
    assert strong.dtype == np.float64  # a numpy float64 scalar stays strong, as in numpy


@cuda.jit
def _scale(u, out, a):
    i = cuda.grid(1)
    if i < u.shape[0]:
        out[i] = u[i] * a + u[i] * u[i] / (1.0 + a)


def kernel_scale(a):
    d_u = cuda.to_device(U)
    out = cuda.device_array_like(d_u)
    _scale[1, 8](d_u, out, a)
    return out.copy_to_host()


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
def test_inside_a_kernel(backend):
    a = 0.7
    with dualgpu.using_backend(backend):
        plain = kernel_scale(a)
        J = np.asarray(dualgpu.jacobian(kernel_scale, a, progress=False))
        value, _ = dualgpu.jvp(kernel_scale, (a,), (1.0,))
    assert plain.dtype == np.float32 and J.dtype == np.float32
    assert np.asarray(value).dtype == np.float32
    if backend == "cpu":
        np.testing.assert_array_equal(np.asarray(value), plain)
    else:  # a dual computes as numba.cuda compiles (a float argument is float64 there);
        # the simulator's plain run computes u[i] * a in float32 (numpy scalars)
        np.testing.assert_allclose(np.asarray(value), plain, rtol=3e-7)
    np.testing.assert_allclose(J, U - U * U / (1.0 + a) ** 2, rtol=1e-6)
    np.testing.assert_allclose(J, _fd(lambda t: kernel_scale(t), a, 1e-3), rtol=2e-3)


# --- property: any float32 host expression with a Python float keeps the plain run's precision
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: (host expression of a float32 array u and a Python float a, its derivative in a)
EXPRESSIONS = [
    (lambda u, a: u * a, lambda u, a: u),
    (lambda u, a: a - u, lambda u, a: np.ones_like(u)),
    (lambda u, a: u / a, lambda u, a: -u / a ** 2),
    (lambda u, a: np.sin(u * a), lambda u, a: np.cos(u * a) * u),
    (lambda u, a: u ** 2 * a + a * a, lambda u, a: u ** 2 + 2 * a),
    (lambda u, a: np.maximum(u, a), lambda u, a: (a > u).astype(np.float64)),
]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=4),
       st.floats(0.25, 3.0), st.integers(0, len(EXPRESSIONS) - 1))
def test_weak_scalar_property(u, a, k):
    expression, slope = EXPRESSIONS[k]
    u = np.array(u, np.float32)
    plain = expression(u, a)
    value, tangent = dualgpu.jvp(lambda t: expression(u, t), (a,), (1.0,))
    value, tangent = np.asarray(value), np.asarray(tangent)
    assert plain.dtype == value.dtype == tangent.dtype == np.float32
    np.testing.assert_array_equal(value, plain)  # bit for bit: the same float32 operations
    expected = slope(u.astype(np.float64), a)
    kink = (k == len(EXPRESSIONS) - 1) & (np.abs(u - np.float32(a)) < 1e-6)
    np.testing.assert_allclose(tangent[~kink], expected[~kink], rtol=1e-5, atol=1e-5)
