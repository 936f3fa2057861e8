"""Dual operations are lowered into the function being compiled (dualgpu.compiled.lowering).

A rule used to be an ``@overload`` that numba compiled as a function of its own, for every
rule, argument kinds, dtype and lane count. These tests pin what replaced it: no function is
compiled besides the user's, the derivatives and values are those of the rule table, the
caller's error model decides whether a division by zero raises, and one function typed for
the GPU and then for the CPU lowers on each with its own implementation.
"""
import math
import re

import numpy as np
import pytest
from numba import cuda, njit, types
from numba.core import event

from dualgpu.compiled.arrays import dual_array_type
from dualgpu.compiled.types import dual_type
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray


class _Compiles(event.Listener):
    """Names of the functions numba compiles while listening, but numba's own."""

    def __init__(self):
        self.names = []

    def on_start(self, ev):
        func = ev.data["dispatcher"].py_func
        if not (func.__module__ or "").startswith("numba."):  # numba's own primals (max)
            self.names.append(func.__name__)

    def on_end(self, ev):
        pass


def _compiled_while(call):
    listener = _Compiles()
    with event.install_listener("numba:compile", listener):
        call()
    return listener.names


def _many_rules(x, y, u, i):
    a = x * y + math.sin(x) / y - x ** 2 + math.exp(y) * math.sqrt(x)
    b = max(a, y) + abs(x) + math.atan2(x, y) + math.hypot(x, y) + np.tanh(a)
    if a < b:  # a comparison of duals
        b += 1.0
    u[i] = b * u[i + 1]  # DualArray element read and store
    return b - math.log1p(x) + y % 0.7


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dual_operations_compile_no_function_of_their_own(dtype):
    """Rules, comparisons and DualArray elements add no compiled function: compiling a
    function of twenty dual operations compiles that function alone (the overloads compiled
    one function per operation and argument types)."""
    fn = njit(_many_rules)
    x, y = Dual(dtype(0.7), (1.0, 0.0, 0.0)), Dual(dtype(1.3), (0.0, 1.0, 0.0))
    u = DualArray(np.ones(4, dtype), np.zeros((3, 4), dtype))
    names = _compiled_while(lambda: fn(x, y, u, 1))
    assert names == ["_many_rules"], names


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-3), (np.float64, 1e-7)])
def test_lowered_rules_match_central_differences(dtype, rtol):
    """Every partial of the function above against central differences, in both dtypes; the
    values equal the plain function's bit for bit."""
    fn = njit(_many_rules)
    plain = njit(_many_rules)
    x0, y0 = 0.7, 1.3

    def value(x, y):
        u = np.ones(4, np.float64)
        return plain(x, y, u, 1), u[1]

    u = DualArray(np.ones(4, dtype), np.zeros((3, 4), dtype))
    u.partials[2, 2] = 1.0  # the third lane: d/du[2]
    got = fn(Dual(dtype(x0), (1.0, 0.0, 0.0)), Dual(dtype(y0), (0.0, 1.0, 0.0)), u, 1)
    u32 = np.ones(4, dtype)
    assert got.value == plain(dtype(x0), dtype(y0), u32, 1)
    h = 1e-6
    for lane, (dx, dy) in enumerate([(h, 0.0), (0.0, h)]):
        (fp, up), (fm, um) = value(x0 + dx, y0 + dy), value(x0 - dx, y0 - dy)
        np.testing.assert_allclose(got.partials[lane], (fp - fm) / (2 * h), rtol=rtol)
        np.testing.assert_allclose(u.partials[lane, 1], (up - um) / (2 * h), rtol=rtol)
    # u[1] = b * u[2]: its partial along u[2] is b
    np.testing.assert_allclose(u.partials[2, 1], u.values[1], rtol=rtol)


def test_zero_division_follows_the_callers_error_model():
    """``dual / 0.0`` raises ZeroDivisionError where plain code does (numba's default Python
    error model) and gives inf where it does not (numpy's), and a derivative factor never
    raises: ``sqrt`` at 0 gives an infinite partial."""
    def divide(a, b):
        return a / b

    d = Dual(1.0, (1.0,))
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        njit(divide)(d, 0.0)
    with pytest.raises(ZeroDivisionError):
        njit(divide)(1.0, 0.0)  # the plain function raises alike
    quiet = njit(error_model="numpy")(divide)(d, 0.0)
    assert quiet.value == math.inf and quiet.partials[0] == math.inf
    root = njit(lambda a: math.sqrt(a))(Dual(0.0, (1.0,)))
    assert root.value == 0.0 and root.partials[0] == math.inf


@pytest.mark.compile
def test_typed_for_the_gpu_then_lowered_on_the_cpu(offline_ptx):
    """A function type remembers the implementation of the target that typed it last: a rule
    whose factor calls an intrinsic (``max`` calls ``same_bits``) compiled to PTX, then with
    ``@njit``, lowers with each target's own implementation (a cached resolution failed)."""
    def pick(a, b):
        return max(a, b) * min(a, b)

    ptx, _ = cuda.compile_ptx(pick, (dual_type(types.float64, 2), types.float64), device=True,
                              cc=(9, 0))
    assert ".func" in ptx
    got = njit(pick)(Dual(2.0, (1.0, 0.0)), 0.5)
    assert got.value == 1.0 and tuple(got.partials) == (0.5, 0.0)


@pytest.mark.compile
def test_lowered_rules_leave_no_call_in_ptx(offline_ptx):
    """On the GPU too the dual operations are inline: the PTX of a dual kernel has no
    ``call`` instruction."""
    def kernel(u, out):
        i = cuda.grid(1)
        if 0 < i < u.shape[0] - 1:
            out[i] = math.sin(u[i]) * u[i - 1] / (1.0 + u[i + 1] ** 2)

    ty = dual_array_type(types.float32, 1, 4)
    ptx, _ = cuda.compile_ptx(kernel, (ty, ty), cc=(9, 0))
    body = ptx.split(".entry", 1)[1]
    assert not re.search(r"^\s*call", body, re.MULTILINE)


def test_storing_into_a_read_only_dual_array_is_a_typing_error():
    """A store into a DualArray of read-only arrays is refused when typed, with the fix."""
    values, partials = np.ones(3), np.zeros((2, 3))
    values.flags.writeable = partials.flags.writeable = False

    @njit
    def put(u, d):
        u[0] = d

    with pytest.raises(Exception, match="read-only"):
        put(DualArray(values, partials), Dual(1.0, (1.0, 0.0)))
    assert values[0] == 1.0 and not partials.any()  # nothing written


def _second_order(x):
    return math.sin(x) * x / (1.0 + x * x) + max(x, 0.2) ** 2 - math.hypot(x, 0.5)


def test_nested_duals_compile_inline_and_match_second_differences():
    """Rules on tagged (nested) duals are lowered inline too: a function of nested duals
    compiles alone, and its second derivative matches central second differences."""
    x = Dual(Dual(0.7, [1.0]), [Dual(1.0, [0.0])], tag=1)
    fn = njit(_second_order)
    names = _compiled_while(lambda: fn(x))
    assert names == ["_second_order"], names
    result = fn(x)
    h = 1e-4
    second = (_second_order(0.7 + h) - 2 * _second_order(0.7) + _second_order(0.7 - h)) / h**2
    first = (_second_order(0.7 + h) - _second_order(0.7 - h)) / (2 * h)
    assert result.value.value == _second_order(0.7)
    np.testing.assert_allclose(result.value.partials[0], first, rtol=1e-7)
    np.testing.assert_allclose(result.partials[0].partials[0], second, rtol=1e-5)


@pytest.mark.compile
def test_transposed_dual_array_compiles_to_ptx(offline_ptx):
    """``a.T`` of a DualArray (2-D and 3-D) types and lowers for CUDA too."""
    def kernel(x, y, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            out.T[0, i] = x.T[1, i] * y.T[1, 0, i]

    f64 = types.float64
    args = (dual_array_type(f64, 2, 4), dual_array_type(f64, 3, 4), dual_array_type(f64, 2, 4))
    ptx, _ = cuda.compile_ptx(kernel, args, cc=(9, 0))
    assert ".entry" in ptx


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_divmod_of_duals(dtype):
    """``divmod`` of duals is ``(a // b, a % b)``: the values numba's plain ``divmod`` gives
    and the partials of the two rules (it was a typing error naming no rule)."""
    @njit
    def both(a, b):
        q, r = divmod(a, b)
        return q, r

    for a, b in [(0.7, 0.3), (-2.5, 0.75), (5.0, -1.5)]:
        q, r = both(Dual(dtype(a), (1.0, 0.0)), Dual(dtype(b), (0.0, 1.0)))
        pq, pr = both(dtype(a), dtype(b))
        assert (q.value, r.value) == (pq, pr)
        assert tuple(q.partials) == (0.0, 0.0)
        # the rule: d(a % b)/da = 1, d(a % b)/db = rint((ans - a) / b) = -(a // b)
        assert r.partials[0] == 1.0 and r.partials[1] == -pq
