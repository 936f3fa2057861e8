"""math.floor/ceil/trunc of inf, NaN and huge floats in kernels (issue 25, crash 3).

numba.cuda compiles the float -> int64 conversion to PTX ``cvt.rzi.s64.f64``, which
saturates (NaN -> 0, +inf -> 2**63-1, -inf -> -2**63). The simulator used to raise
(Python's math.floor) and the cpu backend gave -2**63 for all three (x86's fptosi).
"""
import math

import numpy as np
import pytest

import dualgpu
from dualgpu.core.dualarray import DualArray
from dualgpu.core.float_to_int import INT64_MAX, INT64_MIN

import kernels_float_to_int as kf

X = [math.inf, -math.inf, math.nan, 1e300, -1e300, 2.5, -2.5, 3.0, -0.5]
FLOOR = [INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN, 2, -3, 3, -1]
CEIL = [INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN, 3, -2, 3, 0]
TRUNC = [INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN, 2, -2, 3, 0]
EXPECTED = np.array([FLOOR, CEIL, TRUNC, FLOOR], dtype=np.int64).T


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("dual", [False, True])
def test_saturating_conversion_as_ptx(backend, dtype, dual):
    with np.errstate(over="ignore"):  # 1e300 -> float32 inf
        x = np.array(X).astype(dtype)
    n = x.size
    ints = np.zeros((n, 4), np.int64)
    if dual:
        x = DualArray(x, np.ones((1, n), dtype))
        out = DualArray(np.zeros(n, dtype), np.zeros((1, n), dtype))
    else:
        out = np.zeros(n, dtype)
    with dualgpu.using_backend(backend):
        kf.rounded[1, n](x, ints, out)
    np.testing.assert_array_equal(ints, EXPECTED)
    if dual:  # the derivative of 2x + floor(0.5): 2, whatever the conversions do
        np.testing.assert_array_equal(out.partials[0], np.full(n, 2.0, dtype))


def test_host_math_keeps_python_semantics():
    """Outside kernels dualgpu.dmath.floor is Python's: it raises on inf, as math.floor does."""
    from dualgpu import dmath

    with pytest.raises(OverflowError):
        dmath.floor(math.inf)
    assert dmath.floor(2.5) == 2


def test_ptx_conversion_is_the_saturating_one(offline_ptx):
    """The GPU semantics the other backends copy: numba.cuda's PTX for math.floor."""
    from numba import cuda as numba_cuda, float64, int64

    def k(x, out):
        out[0] = math.floor(x[0])
        out[1] = math.ceil(x[1])
        out[2] = math.trunc(x[2])

    ptx, _ = numba_cuda.compile_ptx(k, (float64[:], int64[:]), cc=offline_ptx)
    conversions = [line.split()[0] for line in ptx.splitlines() if "cvt.rzi.s64" in line]
    assert conversions == ["cvt.rzi.s64.f64"] * 3
