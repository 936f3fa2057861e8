"""``a % b`` in cpu-backend kernels (:mod:`dualgpu.backends.cpu.remainder`): the same values
and types as numba's ``%`` for every integer pairing, sign, zero divisor and overflow case;
kernels with periodic indices give numba's CUDA simulator's results, plain and dual, and
their Jacobians match central differences and the analytic stencil."""
import ast
import itertools

import numpy as np
import pytest
from numba import njit
from numba.cuda import simulator as sim

import dualgpu
import kernels_remainder as kr
from dualgpu.backends.common.translate import unwrap
from dualgpu.backends.cpu import kernel as cpu
from dualgpu.backends.cpu import translation
from dualgpu.backends.cpu.remainder import remainder
from dualgpu.testing import check_jacobian

_ours = njit(lambda a, b: remainder(a, b), error_model="numpy")
_numba = njit(lambda a, b: a % b, error_model="numpy")
# both in one compiled function: one compile per pairing of types
_both = njit(lambda a, b: (remainder(a, b), a % b), error_model="numpy")

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64]
VALUES = [-(2 ** 63), -9, -7, -3, -1, 0, 1, 2, 3, 6, 7, 200, 2 ** 62]
DIVISORS = [-(2 ** 40), -7, -3, -1, 0, 1, 3, 7, 9, 2 ** 40]


def _fits(value, dtype):
    info = np.iinfo(dtype)
    return info.min <= value <= info.max


@pytest.mark.parametrize("ta, tb", list(itertools.product(INTS, INTS)),
                         ids=lambda t: np.dtype(t).name)
def test_integer_remainder_is_numbas(ta, tb):
    """Every value, and the result's type, equal numba's ``%`` (numpy's error model: x % 0 is
    0; MIN % -1 is 0), whether or not the shortcut ``0 <= a < b`` applies."""
    checked = 0
    for a, b in itertools.product(VALUES, DIVISORS):
        if not (_fits(a, ta) and _fits(b, tb)):
            continue
        x, y = ta(a), tb(b)
        got, want = _both(x, y)
        assert type(got) is type(want) and got == want, (ta, tb, a, b, got, want)
        checked += 1
    assert checked >= 12
    ours, theirs = _both.nopython_signatures[-1].return_type
    assert ours == theirs


def test_literals_floats_and_python_semantics():
    lit = njit(lambda i, n: (remainder(i - 1, n), remainder(i + 1, 4), remainder(-1, n)))
    assert lit(0, 5) == ((0 - 1) % 5, 1 % 4, -1 % 5) == (4, 1, 4)
    for a, b in [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (np.float32(-1.25), np.float32(0.5)),
                 (3, 2.5), (-0.0, 1.0)]:
        got, want = _ours(a, b), _numba(a, b)
        assert type(got) is type(want) and (got == want) and np.signbit(got) == np.signbit(want)


def test_kernels_compile_percent_as_remainder():
    tree = translation.Translation(unwrap(kr.periodic_laplacian), "kernel", "lap").tree
    source = ast.unparse(tree)
    assert source.count("_dg_mod(") == 4 and "%" not in source


def simulate(kernel, griddim, blockdim, *args):
    sim.jit(unwrap(kernel))[griddim, blockdim](*args)


_COMPILED = {}


def compiled(kernel):
    """One cpu-backend kernel per fixture kernel, shared by the tests of this file (each
    lane count, dtype and launch mode still compiles its own launcher)."""
    if kernel not in _COMPILED:
        _COMPILED[kernel] = cpu.CpuKernel(unwrap(kernel))
    return _COMPILED[kernel]


@pytest.mark.parametrize("shift", [-41, -20, -1, 0, 1, 19, 20, 63])
def test_periodic_shift_matches_simulator(shift, launch_mode, rng):
    n = 20
    x = rng.random(n)
    got, expected = np.full(n, np.nan), np.full(n, np.nan)
    compiled(kr.shifted_gather).launch((3,), (8,), (x, got, shift))
    simulate(kr.shifted_gather, (3,), (8,), x, expected, shift)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.roll(x, -shift))


@pytest.mark.parametrize("ta, tb", [(np.int64, np.int64), (np.int32, np.int64),
                                    (np.int16, np.int32), (np.uint32, np.uint32),
                                    (np.uint64, np.uint8)], ids=str)
def test_integer_remainders_match_simulator_and_numpy(ta, tb, rng):
    signed = np.issubdtype(ta, np.signedinteger)
    a = rng.integers(-50 if signed else 0, 50, size=37).astype(ta)
    b = rng.choice([v for v in (-9, -4, -1, 1, 3, 7, 60) if signed or v > 0], size=37).astype(tb)
    out_type = np.result_type(ta, tb)
    got, expected = np.zeros(37, out_type), np.zeros(37, out_type)
    compiled(kr.int_remainders).launch((2,), (32,), (a, b, got))
    simulate(kr.int_remainders, (2,), (32,), a, b, expected)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, np.mod(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dual_remainder_and_periodic_neighbours_jacobian(dtype, rng):
    n, period = 16, dtype(0.7)
    x = (rng.random(n) * 3 - 1.5).astype(dtype)

    kernel = dualgpu.jit(kr.wrapped_product)

    def run(x):
        x = dualgpu.cuda.to_device(x)
        out = dualgpu.cuda.device_array_like(x)
        kernel[1, 32](x, period, out)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"):
        check_jacobian(run, x)
        jac = dualgpu.jacobian(run, x)
    # analytic: d out_i / d x_i = 1 (away from the jumps of %), and the two neighbours
    want = np.eye(n)
    for i in range(n):
        want[i, (i - 1) % n] += x[(i + 1) % n]
        want[i, (i + 1) % n] += x[(i - 1) % n]
    tol = 1e-6 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(jac, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_periodic_laplacian_dual_matches_simulator(dtype, launch_mode, rng):
    shape, r = (13, 10), dtype(0.2)
    u0 = rng.random(shape).astype(dtype)
    seeds = rng.random((3, *shape)).astype(dtype)
    u = dualgpu.DualArray(u0, seeds)
    got = dualgpu.DualArray(np.zeros(shape, dtype), np.zeros((3, *shape), dtype))
    compiled(kr.periodic_laplacian).launch((2, 2), (8, 8), (u, got, r))
    for lane in range(-1, 3):
        src = u0 if lane < 0 else seeds[lane]
        want = np.zeros(shape, dtype)
        # the values, and each lane: the tangent of u + r lap(u) along s is s + r lap(s)
        simulate(kr.periodic_laplacian, (2, 2), (8, 8), src, want, r)
        got_lane = np.asarray(got.values) if lane < 0 else np.asarray(got.partials)[lane]
        np.testing.assert_allclose(got_lane, want, rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_inplace_remainder_and_power_compile_as_the_operators():
    """``x %= n``, ``a[i] %= n`` and ``x **= -1`` compile as ``x % n`` and ``x ** -1`` do
    (a target that cannot be read back twice without a side effect keeps ``%=``)."""
    tree = translation.Translation(unwrap(kr.inplace_wrap_and_power), "kernel", "k").tree
    source = ast.unparse(tree)
    assert not any(isinstance(n, ast.AugAssign) for n in ast.walk(tree))
    assert source.count("_dg_mod(") == 2 and source.count("_dg_power(") == 1
    assert "out[i] = out[i] ** 2" in source  # a literal exponent >= 0: numba's products


@pytest.mark.parametrize("shift", [-23, -1, 0, 5, 44])
def test_inplace_remainder_and_power_match_the_simulator(shift, launch_mode):
    """Values and integer results as numba's simulator gives them, and ``0.0 **= -1`` gives
    inf, as numba.cuda on a GPU (it raised ZeroDivisionError on the cpu backend before)."""
    x = np.array([0.0, 0.5, -2.0, 4.0, 1.5, -0.25, 3.0])
    n = x.size
    got, counts = np.full(n, np.nan), np.zeros(n, np.int64)
    compiled(kr.inplace_wrap_and_power).launch((1,), (8,), (x, shift, got, counts))
    want_index = (np.arange(n) + shift) % n
    np.testing.assert_array_equal(counts, want_index % 3)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(got, (1.0 / x[want_index]) ** 2)
    safe = x + (x == 0)  # the simulator is Python: 0.0 ** -1 raises there
    expected, counts_sim = np.full(n, np.nan), np.zeros(n, np.int64)
    simulate(kr.inplace_wrap_and_power, (1,), (8,), safe, shift, expected, counts_sim)
    np.testing.assert_array_equal(counts_sim, counts)
    finite = x[want_index] != 0
    np.testing.assert_array_equal(got[finite], expected[finite])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inplace_power_of_duals_jacobian(dtype):
    """Through ``v **= -1`` and ``out[i] **= 2`` of duals the Jacobian is analytic:
    d/dx_j of x_j ** -2 is -2 x_j ** -3, and it matches central differences."""
    x = np.array([0.5, -2.0, 4.0, 1.5, -0.25], dtype)
    kernel = dualgpu.jit(kr.inplace_wrap_and_power)

    def run(x):
        out = dualgpu.cuda.device_array_like(x)
        counts = dualgpu.cuda.device_array(x.shape[0], np.int64)
        kernel[1, 8](dualgpu.cuda.to_device(x), 0, out, counts)
        return out.copy_to_host()

    with dualgpu.using_backend("cpu"):
        check_jacobian(run, x)
        jac = dualgpu.jacobian(run, x)
    np.testing.assert_allclose(jac, np.diag(-2 * x.astype(np.float64) ** -3),
                               rtol=1e-5 if dtype == np.float32 else 1e-13)
