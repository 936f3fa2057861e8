"""``cuda.fma`` on the cpu backend is fused (one rounding), as on the GPU, for plain and dual
operands; its partials are those of ``a * b + c``."""
from fractions import Fraction

import numpy as np
import pytest

import dualgpu
import kernels_fma as K
from dualgpu.core.dualarray import DualArray


def _exact(a, b, c, dtype):
    """``a * b + c`` rounded once to ``dtype`` (the test values make it exact in float32)."""
    return np.array([float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
                     for x, y, z in zip(a, b, c)], dtype)


@pytest.mark.parametrize("dtype, eps", [(np.float64, 2.0 ** -30), (np.float32, 2.0 ** -13)])
def test_plain_fma_rounds_once(dtype, eps):
    a = np.array([1 + eps, 1.5, 3.0], dtype)
    b = np.array([1 - eps, -2.0, 1 / 3], dtype)
    c = np.array([-1.0, 0.25, -1.0], dtype)
    out = np.zeros(3, dtype)
    with dualgpu.using_backend("cpu"):
        K.fused[1, 32](a, b, c, out)
    np.testing.assert_array_equal(out, _exact(a, b, c, dtype))
    assert out[0] == -(eps * eps) != (a[0] * b[0] + c[0])  # two roundings would give 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dual_fma_value_fused_partials_of_the_product_sum(dtype, rng):
    n, lanes = 5, 3
    a, b, c = (DualArray(rng.standard_normal(n).astype(dtype),
                         rng.standard_normal((lanes, n)).astype(dtype)) for _ in range(3))
    a.values[0], b.values[0], c.values[0] = 1 + 2.0 ** -13, 1 - 2.0 ** -13, -1.0
    out = dualgpu.dual_array(np.zeros(n, dtype), np.zeros((lanes, n), dtype))
    with dualgpu.using_backend("cpu"):
        K.fused[1, 32](a, b, c, out)
    np.testing.assert_array_equal(out.values, _exact(a.values, b.values, c.values, dtype))
    expected = a.partials * b.values + a.values * b.partials + c.partials
    np.testing.assert_allclose(out.partials, expected, rtol=4 * np.finfo(dtype).eps)


def test_fma_derivatives_match_central_differences(rng):
    from dualgpu.testing import check_jacobian

    a32 = rng.standard_normal(6).astype(np.float32)

    def f(a, s):
        out = dualgpu.cuda.device_array_like(a)
        K.fused_scalar[1, 32](dualgpu.cuda.to_device(a), s, out)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"):
        check_jacobian(f, rng.standard_normal(6), 0.7, argnums=(0, 1))
        check_jacobian(f, a32, 0.7, argnums=(0,))
