"""A dual's value is the plain value, and its partials follow it, on every path (issue 10).

Paths: ``python`` (the pure-Python dual on the host, ``math`` made dual-aware), ``njit``
(a user's ``@njit``), ``cpu`` and ``cudasim`` (the same device function inside a kernel).
Each test names the bug it would have caught.
"""
import functools
import math
import types as pytypes
import warnings

import numpy as np
import pytest
from numba import njit

import dualgpu
from dualgpu import Dual, DualArray, dmath
from dualgpu.autodiff.api import jacobian

import kernels_edge_cases as K

PATHS = ["python", "njit", "cpu", "cudasim"]
DTYPES = [np.float64, np.float32]
NAN, INF = math.nan, math.inf


@functools.lru_cache(maxsize=None)
def _python(device_function):
    fn = device_function.py_func
    return pytypes.FunctionType(fn.__code__, {**fn.__globals__, "math": dmath})


@functools.lru_cache(maxsize=None)
def _njit(device_function, error_model="python"):
    return njit(error_model=error_model)(device_function.py_func)


def run(device_function, kernel, path, x, y):
    """The device function's outputs on ``path`` for dual (or plain) scalars x and y."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if path == "python":
            return list(_python(device_function)(x, y))
        if path == "njit":
            return list(_njit(device_function)(x, y))
        dual = isinstance(x, Dual)
        dtype = x.dtype if dual else np.asarray(x).dtype
        n = len(_njit(device_function, "numpy")(np.float64(1.0), np.float64(1.0)))
        if dual:
            xs = DualArray(np.array([x.value]), x.partials.reshape(-1, 1).copy())
            ys = DualArray(np.array([y.value]), y.partials.reshape(-1, 1).copy())
            out = dualgpu.dual_array(np.zeros(n, dtype), lanes=x.lanes)
        else:
            xs, ys, out = np.array([x], dtype), np.array([y], dtype), np.zeros(n, dtype)
        with dualgpu.using_backend(path):
            kernel[1, 1](xs, ys, out)
        if not dual:
            return list(out)
        return [Dual(out.values[k], out.partials[:, k]) for k in range(n)]


def plain(device_function, kernel, path, x, y, simulator="numpy"):
    """The same computation on plain floats: numba's on the compiled paths (a kernel uses
    numpy's error model), numpy scalars through Python on the host. On the simulator, numba's
    for ``math`` and operators (a simulated kernel computes what the compiled one does) and
    numpy's for numpy ufuncs: ``simulator`` says which the computation needs."""
    if path in ("njit", "cpu") or path == "cudasim" and simulator == "numba":
        model = "python" if path == "njit" else "numpy"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return list(_njit(device_function, model)(x, y))
    with np.errstate(all="ignore"):
        return list(device_function.py_func(x, y))


def same_bits(a, b):
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def duals(x, y, dtype):
    t = np.dtype(dtype).type
    return (Dual(t(x), np.array([1.0, 0.0], dtype)), Dual(t(y), np.array([0.0, 1.0], dtype)))


# --- item 2: x % y and fmod w.r.t. y, |x / y| >= 2**63 ----------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("path", PATHS)
def test_remainders_wrt_divisor_do_not_saturate(path, dtype):
    # numba's math.floor/trunc return int64: -floor(1e30 / 3) used to be -9.22e18
    x, y = duals(1e30, 3.0, dtype)
    mod, fmod = run(K.remainders, K.remainders_kernel, path, x, y)
    q = np.float64(np.dtype(dtype).type(1e30) / np.dtype(dtype).type(3.0))
    for got, expected in ((mod, -np.floor(q)), (fmod, -np.trunc(q))):
        assert got.partials[0] == 1.0
        np.testing.assert_allclose(got.partials[1], expected, rtol=1e-6)
        assert abs(got.partials[1]) > 1e29


# --- items 3 and 4: min/max/np.minimum/np.maximum/np.floor_divide --------------------------
SELECTION_POINTS = [(NAN, 1.0), (1.0, NAN), (NAN, NAN), (-0.0, 0.0), (0.0, -0.0), (2.0, 2.0),
                    (INF, NAN), (-INF, 1.0), (INF, 1.0), (-1.0, INF), (1.0, 0.0), (0.0, 0.0)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("path", PATHS)
def test_selections_give_plain_values_and_the_chosen_operands_partials(path, dtype):
    for a, b in SELECTION_POINTS:
        x, y = duals(a, b, dtype)
        got = run(K.selections, K.selections_kernel, path, x, y)
        t = np.dtype(dtype).type
        expected = plain(K.selections, K.selections_kernel, path, t(a), t(b))
        for k, (dual, value) in enumerate(zip(got, expected)):
            where = f"{path}: output {k} at ({a}, {b})"
            assert same_bits(dual.value, value), f"{where}: value {dual.value} vs plain {value}"
            if k == 4:  # floor division: zero derivative
                assert not np.any(dual.partials), where
                continue
            # the partials of the operand whose value it is (ties: the first)
            source = x if same_bits(dual.value, x.value) else y
            if same_bits(dual.value, y.value) and not same_bits(dual.value, x.value):
                source = y
            assert dual.partials.tolist() == source.partials.tolist(), (
                f"{where}: value {dual.value} with partials {dual.partials.tolist()}")


# --- item 5: numba's promotion on the simulator too --------------------------------------
OTHERS = {
    "python float": 2.5, "python int": 2, "np.float32": np.float32(2.5),
    "np.float64": np.float64(2.5), "np.int32": np.int32(2),
    "float32 dual": Dual(np.float32(2.5), np.array([0.5, 1.0], np.float32)),
    "float64 dual": Dual(2.5, [0.5, 1.0]),
}


@pytest.mark.parametrize("other", list(OTHERS))
def test_cudasim_promotes_as_compiled_code(other):
    # a float32 dual with a Python float stayed float32 on cudasim but is float64 compiled;
    # float32 N-body went NaN on cudasim only
    f = OTHERS[other]
    d = Dual(np.float32(0.75), np.array([1.0, -2.0], np.float32))
    compiled = _njit(K.promotions)(d, f)
    K.RECORDED.clear()
    with dualgpu.using_backend("cudasim"):
        K.promotions_kernel[1, 1](DualArray(np.array([d.value]), d.partials.reshape(2, 1)), f)
    simulated = K.RECORDED.pop()
    for k, (c, s) in enumerate(zip(compiled, simulated)):
        assert s.dtype == c.dtype, (
            f"expression {k} with {other}: cudasim {s.dtype}, compiled {c.dtype}")
        assert same_bits(s.value, c.value), f"expression {k} with {other}: {s.value} vs {c.value}"
        np.testing.assert_allclose(s.partials, c.partials, rtol=1e-6)


@pytest.mark.parametrize("path", ["cpu", "cudasim"])
def test_float32_state_with_a_float64_parameter(path):
    # as a plain kernel takes float32 arrays and a float64 scalar, a dual one does
    u = np.arange(1.0, 5.0, dtype=np.float32)
    with dualgpu.using_backend(path):
        J_u, J_a = jacobian(K.axpy_simulation, u, 2.0, argnums=(0, 1), chunk_size=5,
                            progress=False)
    assert J_u.dtype == np.float32
    np.testing.assert_array_equal(J_u, 2.0 * np.eye(4))
    np.testing.assert_array_equal(J_a, u)


def test_host_code_follows_numpy_promotion():
    # host code such as r = alpha * dt / dx**2 stays float32 for a float32 alpha, as numpy's
    # does, so the kernel it feeds sees one dtype
    d = Dual(np.float32(0.75), np.array([1.0], np.float32))
    assert (d * 4e-5).dtype == np.float32 == (np.float32(0.75) * 4e-5).dtype
    assert (d * np.float64(2)).dtype == np.float64
    assert dmath.atan2(d, np.float32(2.0)).dtype == np.float32


# --- item 6: device_array under the driver is zeros on every backend ------------------------
def _accumulated(u):
    d_u = dualgpu.cuda.to_device(u)
    out = dualgpu.cuda.device_array(u.shape, u.dtype)  # read by the kernel before written
    K.accumulate[1, 32](d_u, out)
    return out.copy_to_host()


@pytest.mark.parametrize("path", ["cpu", "cudasim"])
def test_allocated_dual_arrays_start_at_zero(path):
    u = np.linspace(1.0, 2.0, 5)
    with dualgpu.using_backend(path):
        J = jacobian(_accumulated, u, chunk_size=5, progress=False)
        allocated = [dualgpu.cuda.device_array_like(dualgpu.dual_array(u, lanes=3))]
        with dualgpu.core._context.dual_allocation(2):
            allocated.append(dualgpu.cuda.device_array(7))
    np.testing.assert_array_equal(J, 2.0 * np.eye(5))
    for array in allocated:
        host = array.copy_to_host()
        assert not host.values.any() and not host.partials.any()


# --- loud: @njit does not raise where plain @njit does not ----------------------------------
@pytest.mark.parametrize("path", PATHS)
def test_singular_points_give_plain_values_without_raising(path):
    # sqrt(0), log(0), atan2(0, 0), fmod(1, 0), asin(1) raised ZeroDivisionError in @njit
    x, y = duals(0.0, 1.0, np.float64)
    got = run(K.singular_points, K.singular_points_kernel, path, x, y)
    expected = plain(K.singular_points, K.singular_points_kernel, path, 0.0, 1.0,
                     simulator="numba") if path != "python" else [0.0, -INF, 0.0, NAN,
                                                                  math.pi / 2, 0.0]
    for k, (dual, value) in enumerate(zip(got, expected)):
        assert same_bits(dual.value, value), f"{path}: output {k}: {dual.value} vs {value}"
    assert got[0].partials[0] == INF and got[1].partials[0] == INF  # the infinite factors
    assert got[5].partials.tolist() == [1.0, 0.0]  # max(0, log(0)): x's partials, exactly


@pytest.mark.parametrize("expression", [
    lambda a, b: a / b, lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ** -1,
    lambda a, b: pow(a, -2),
], ids=["truediv", "floordiv", "mod", "pow -1", "pow -2"])
def test_njit_raises_exactly_where_plain_njit_raises(expression):
    plain_fn, dual_fn = njit(expression), njit(expression)
    with pytest.raises(ZeroDivisionError) as plain_error:
        plain_fn(0.0, 0.0)
    with pytest.raises(ZeroDivisionError) as dual_error:
        dual_fn(*duals(0.0, 0.0, np.float64))
    assert str(dual_error.value) == str(plain_error.value)
    # and where plain code does not raise, neither does the dual
    value = dual_fn(*duals(3.0, 2.0, np.float64)).value
    assert same_bits(value, plain_fn(3.0, 2.0))


def test_kernels_do_not_raise_on_zero_divisors():
    # numpy's error model, as the plain kernel: inf and nan
    x, y = DualArray(np.array([1.0]), np.ones((1, 1))), DualArray(np.array([0.0]), np.ones((1, 1)))
    for path in ("cpu", "cudasim"):
        out = dualgpu.dual_array(np.zeros(1), lanes=1)
        with dualgpu.using_backend(path), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            K.ratio[1, 1](x, y, out)
        assert out.values[0] == INF, path


# --- loud: math.trunc of a float32 dual ----------------------------------------------------
@pytest.mark.parametrize("path", ["cpu", "cudasim"])
def test_trunc_of_a_float32_dual(path):
    x = dualgpu.dual_array(np.array([2.75, -1.5], np.float32), np.ones((1, 2), np.float32))
    out = dualgpu.dual_array(np.zeros(2, np.float32), lanes=1)
    with dualgpu.using_backend(path):
        K.truncated[1, 2](x, out)
    np.testing.assert_array_equal(out.values, [4.75, -2.5])
    np.testing.assert_array_equal(out.partials, [[1.0, 1.0]])
    d = Dual(np.float32(2.75), np.ones(1, np.float32))
    assert dmath.trunc(d) == math.trunc(d) == 2 and dmath.trunc(np.float32(-1.5)) == -1


def test_log_to_a_base_on_the_host_and_in_the_simulator():
    """math.log(x, base) of a dual (Python's two-argument log: the simulator and host code)
    was a ctypes error; it is log(x) / log(base), the value bit for bit as Python's."""
    x, base = Dual(2.0, [1.0, 0.0]), Dual(3.0, [0.0, 1.0])
    got = dmath.log(x, base)
    assert got.value == math.log(2.0, 3.0)
    np.testing.assert_allclose(got.partials, [1 / (2 * math.log(3)),
                                              -math.log(2) / (3 * math.log(3) ** 2)], rtol=1e-15)
    assert dmath.log(x, 10.0).value == math.log(2.0, 10.0)
    assert dmath.log(2.0, 3.0) == math.log(2.0, 3.0)


@dualgpu.cuda.jit
def _log_base(x, out):
    i = dualgpu.cuda.grid(1)
    if i < x.shape[0]:
        out[i] = math.log(x[i], 3.0)


def test_log_to_a_base_in_a_plain_simulated_kernel():
    # numba's simulator runs it; dualgpu's gave a ctypes error on plain numbers in kernels
    # (found by an unseen round)
    out = np.zeros(2)
    with dualgpu.using_backend("cudasim"):
        _log_base[1, 32](np.array([3.0, 9.0]), out)
    np.testing.assert_allclose(out, [1.0, 2.0], rtol=1e-15)
