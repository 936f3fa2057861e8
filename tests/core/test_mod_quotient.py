"""``%``, ``fmod`` and ``remainder`` near the jump: the partial w.r.t. the divisor is -n for the
quotient n that the *value* used (``1.0 % 0.1 == 0.0999...`` is ``1 - 9 * 0.1``: d/dy = -9),
not ``-floor(x / y)`` whose rounded quotient can land on the next integer (10).
Every path: the Python Dual, @njit, the cpu and cudasim kernel backends, host numpy, PTX."""
import math

import numpy as np
import pytest
from numba import njit, types

import dualgpu
from dualgpu import Dual, DualArray, cuda

# (x, y): the exact quotient sits just below an integer that x / y rounds up to
EDGES = [(1.0, 0.1), (1.0, 0.2), (3.0, 0.3), (-1.0, 0.1), (1.0, -0.1), (7.0, 0.7)]
OPS = {"mod": lambda x, y: x % y, "fmod": math.fmod, "remainder": math.remainder}


def _expected(op, x, y, dtype):
    """(value, d/dx, d/dy) from the value itself: ans = x - n y with n = (x - ans) / y exactly."""
    t = np.dtype(dtype).type
    value = {"mod": np.mod, "fmod": np.fmod, "remainder": lambda a, b: t(math.remainder(a, b))}[
        op](t(x), t(y))
    n = np.rint((np.float64(t(x)) - np.float64(value)) / np.float64(t(y)))
    return value, 1.0, -n


def _check(op, x, y, dtype, value, dx, dy):
    want, wdx, wdy = _expected(op, x, y, dtype)
    assert value == want, (op, x, y, value, want)
    assert (dx, dy) == (wdx, wdy), (
        f"{op}({x}, {y}) {np.dtype(dtype)}: partials {dx, dy}, want {wdx, wdy}")


def test_the_edges_are_edges():
    """The cases are the hard ones: the rounded quotient differs from the value's (else the
    test could not fail on the old rule)."""
    for x, y in EDGES[:2]:
        assert np.floor(x / y) != np.rint((x - x % y) / y)
    one, tenth = np.float32(1.0), np.float32(0.1)
    assert np.floor(one / tenth) == 10 and one % tenth > 0.09
    # and a forward difference on the side of y the value sits on agrees with -9
    h = 1e-7
    assert abs((math.fmod(1.0, 0.1 + h) - math.fmod(1.0, 0.1)) / h - (-9)) < 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", list(OPS))
def test_python_dual(op, dtype):
    for x, y in EDGES:
        a = Dual(x, [1.0, 0.0], dtype=dtype)
        b = Dual(y, [0.0, 1.0], dtype=dtype)
        r = a % b if op == "mod" else getattr(dualgpu.dmath, op)(a, b)
        _check(op, x, y, dtype, r.value, r.partials[0], r.partials[1])


def _njit_ops():
    @njit
    def run(x, y, out):
        for i in range(x.shape[0]):
            out[0, i] = x[i] % y[i]
            out[1, i] = math.fmod(x[i], y[i])
            out[2, i] = math.remainder(x[i], y[i])
    return run


@cuda.jit
def _kernel(x, y, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0, i] = x[i] % y[i]
        out[1, i] = math.fmod(x[i], y[i])
        out[2, i] = math.remainder(x[i], y[i])


def _operands(dtype):
    xs = np.array([e[0] for e in EDGES], dtype)
    ys = np.array([e[1] for e in EDGES], dtype)
    n = len(EDGES)
    x = DualArray(xs, np.stack([np.ones(n), np.zeros(n)]).astype(dtype))
    y = DualArray(ys, np.stack([np.zeros(n), np.ones(n)]).astype(dtype))
    return x, y


def _check_array(out, dtype):
    values, partials = np.asarray(out.values), np.asarray(out.partials)
    for k, op in enumerate(OPS):
        for i, (x, y) in enumerate(EDGES):
            _check(op, x, y, dtype, values[k, i], partials[0, k, i], partials[1, k, i])


_NJIT = _njit_ops()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_njit(dtype):
    x, y = _operands(dtype)
    out = dualgpu.dual_array(np.zeros((3, len(EDGES))), lanes=2, dtype=dtype)
    _NJIT(x, y, out)
    _check_array(out, dtype)


@pytest.mark.parametrize("backend", ["cpu", "cudasim"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_backends(backend, dtype):
    x, y = _operands(dtype)
    with dualgpu.using_backend(backend):
        out = dualgpu.dual_array(np.zeros((3, len(EDGES))), lanes=2, dtype=dtype)
        _kernel[1, 8](x, y, out)
    _check_array(out, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_host_numpy(dtype):
    x, y = _operands(dtype)
    for op, ufunc in (("mod", np.mod), ("mod", np.remainder), ("fmod", np.fmod)):
        r = ufunc(x, y)
        for i, (a, b) in enumerate(EDGES):
            _check(op, a, b, dtype, np.asarray(r.values)[i], np.asarray(r.partials)[0, i],
                   np.asarray(r.partials)[1, i])


@pytest.mark.parametrize("dtype", [types.float32, types.float64])
def test_ptx(offline_ptx, dtype):
    from numba import cuda as numba_cuda

    from dualgpu.compiled.arrays import dual_array_type

    def kernel(x, y, out):
        i = numba_cuda.grid(1)
        if i < x.shape[0]:
            out[0, i] = x[i] % y[i]
            out[1, i] = math.fmod(x[i], y[i])
            out[2, i] = math.remainder(x[i], y[i])

    a = dual_array_type(dtype, 1, 2)
    ptx, _ = numba_cuda.compile_ptx(kernel, (a, a, dual_array_type(dtype, 2, 2)), cc=offline_ptx)
    assert ".entry" in ptx and "llvm." not in ptx  # no intrinsic left unresolved for the linker


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_rint_rounds_half_to_even(dtype):
    from dualgpu.compiled.types import float_rint

    xs = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, 9.0000001, -9.9999999, 1e20,
                   np.inf, -np.inf, np.nan, 3.0, -0.0], dtype)
    got = np.array(njit(lambda a: [float_rint(v) for v in a])(xs), dtype)
    np.testing.assert_array_equal(got, np.rint(xs))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.rint(xs)))
    one = njit(lambda v: float_rint(v))
    one(dtype(2.5))
    assert str(one.nopython_signatures[0].return_type) == np.dtype(dtype).name
