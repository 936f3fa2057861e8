"""Integer powers at zero (issue 25, unclear error 5).

``x ** -1`` at ``x = 0`` raised ZeroDivisionError on the cpu backend (numba's CPU
integer power inverts in code compiled with Python's error model) and ``a ** -1``
of a float kernel argument raised on the simulator (a Python float), where the GPU
and numpy give ``inf``. Values and derivatives now follow numpy on every backend.
"""
import warnings

import numpy as np
import pytest

import dualgpu
from dualgpu import Dual
from dualgpu.core.dualarray import DualArray

import kernels_int_power as kp

X = np.array([0.0, -0.0, 2.0, -1.5])


def numpy_reference(x, a):
    with np.errstate(all="ignore"):
        values = np.stack([x ** -1.0, x ** -2.0, x ** -3.0, np.full_like(x, a) ** -1.0,
                           x ** -2.0 + x ** 2.0], axis=1)
        # a's tangent is 0: its factor -a**-2 = -inf times 0 is NaN, as numpy's chain rule
        a_slope = -1.0 * np.full_like(x, a) ** -2.0 * 0.0
        slopes = np.stack([-1.0 * x ** -2.0, -2.0 * x ** -3.0, -3.0 * x ** -4.0,
                           a_slope, -2.0 * x ** -3.0 + 2.0 * x], axis=1)
    return values, slopes


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("dual", [False, True])
def test_negative_integer_powers_at_zero_follow_numpy(backend, dtype, dual):
    x = X.astype(dtype)
    n = x.size
    values, slopes = numpy_reference(x.astype(np.float64), 0.0)
    out = np.zeros((n, 5), dtype)
    arg_x, a = x, 0.0
    if dual:
        arg_x = DualArray(x.copy(), np.ones((1, n), dtype))
        out = DualArray(out, np.zeros((1, n, 5), dtype))
        a = Dual(dtype(0.0), [dtype(0.0)])
    with dualgpu.using_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's divide warnings (cudasim)
        kp.negative_powers[1, n](arg_x, a, out)
    got = out.values if dual else out
    np.testing.assert_allclose(got, values.astype(dtype), rtol=1e-6)
    assert np.array_equal(np.signbit(got), np.signbit(values))  # -inf at -0.0 ** odd
    if dual:
        np.testing.assert_allclose(out.partials[0], slopes.astype(dtype), rtol=1e-6)
        finite = ~np.isnan(slopes)  # (a NaN's sign bit is the machine's choice)
        assert np.array_equal(np.signbit(out.partials[0])[finite], np.signbit(slopes)[finite])


def test_finite_powers_match_finite_differences():
    x = np.array([0.7, -1.3])
    f = lambda u: kp_run(u)  # noqa: E731
    with dualgpu.using_backend("cpu"):
        J = dualgpu.jacobian(f, x)
        h = 1e-6
        fd = np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)], axis=-1)
    np.testing.assert_allclose(J, fd, rtol=1e-6)


def kp_run(u):
    out = dualgpu.cuda.device_array((u.shape[0], 5), dtype=u.dtype)
    kp.negative_powers[1, u.shape[0]](dualgpu.cuda.to_device(u), 0.5, out)
    return out.copy_to_host()


def test_float_int_power_keeps_the_type_and_infinite_bases():
    """``float_int_power`` (the cpu backend's ``a ** n``) is numba's ``**`` away from zero:
    float32 stays float32 (``1 / r`` made it float64), and an infinite base gives numba's
    inf (``a * 0 + 1`` as the start of the product made it NaN)."""
    from numba import njit

    from dualgpu.core.int_power import float_int_power

    ours = njit(lambda a, b: float_int_power(a, b))
    theirs = njit(lambda a, b: a ** b)
    for a in (np.float32(1.5), np.float32(-0.75), 1.5, np.inf, -np.inf, np.float32(np.inf)):
        for b in (-3, -1, 1, 2, 3):
            got, want = ours(a, b), theirs(a, b)
            assert got == want or (np.isnan(got) and np.isnan(want)), (a, b, got, want)
    assert {str(s.return_type) for s in ours.nopython_signatures} == {"float32", "float64"}


def test_plain_float32_kernel_negative_power_is_float32_on_the_cpu_backend():
    """A plain float32 kernel's ``x[i] ** -1`` rounds to float32 as numba.cuda does."""
    x = np.float32([0.7, 0.3, 0.9])
    out = np.zeros(3)
    with dualgpu.using_backend("cpu"):
        kp.reciprocal_into[1, 4](x, out)
    np.testing.assert_array_equal(out, (np.float32(1) / x).astype(np.float64))
