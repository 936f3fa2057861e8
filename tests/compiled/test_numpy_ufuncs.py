"""numpy ufuncs on dual scalars (np.sin(u[i]) in a kernel) follow the same rule table."""
import functools

import numpy as np
import pytest
from numba import cuda, njit, types

from dualgpu import Dual, MissingRuleError, rules
from dualgpu.core.dual import apply_rule
from dualgpu.compiled.arrays import dual_array_type

UNARY = [u for u, r in rules.NUMPY_UFUNCS.items() if r in rules.UNARY_RULES]
BINARY = [u for u, r in rules.NUMPY_UFUNCS.items() if r in rules.BINARY_RULES]


def _point(rule_name):
    rule = rules.UNARY_RULES.get(rule_name) or rules.BINARY_RULES[rule_name]
    return [0.3 * lo + 0.7 * hi for lo, hi in rule.domain]


@functools.lru_cache(maxsize=None)
def _compiled(ufunc_name, arity):
    ufunc = getattr(np, ufunc_name)
    if arity == 1:
        return njit(lambda a: ufunc(a))
    return njit(lambda a, b: (ufunc(a, b), ufunc(a, b.value), ufunc(a.value, b)))


@pytest.mark.parametrize("name", UNARY)
def test_unary_ufunc_equals_its_rule(name):
    rule_name = rules.NUMPY_UFUNCS[name]
    (x,) = _point(rule_name)
    d = Dual(x, [1.0, -0.5])
    expected = apply_rule(rule_name, d)
    for got in (getattr(np, name)(d), _compiled(name, 1)(d)):
        assert got.value == pytest.approx(expected.value, rel=1e-14)
        np.testing.assert_allclose(got.partials, expected.partials, rtol=1e-13)


@pytest.mark.parametrize("name", BINARY)
def test_binary_ufunc_equals_its_rule(name):
    rule_name = rules.NUMPY_UFUNCS[name]
    x, y = _point(rule_name)
    a, b = Dual(x, [1.0, 0.0]), Dual(y, [0.0, 1.0])
    expected = [apply_rule(rule_name, a, b), apply_rule(rule_name, a, y),
                apply_rule(rule_name, x, b)]
    python = [getattr(np, name)(a, b), getattr(np, name)(a, y), getattr(np, name)(x, b)]
    for got_set in (python, _compiled(name, 2)(a, b)):
        for got, want in zip(got_set, expected):
            assert got.value == pytest.approx(want.value, rel=1e-14)
            np.testing.assert_allclose(got.partials, want.partials, rtol=1e-13, atol=1e-15)


def test_ufunc_without_rule_names_itself():
    with pytest.raises(MissingRuleError, match=r"numpy\.cbrt has no derivative rule"):
        np.cbrt(Dual(2.0, [1.0]))


def test_min_max_of_three_follow_the_tie_convention():
    a, b = Dual(0.5, [1.0, 0.0]), Dual(0.5, [0.0, 1.0])
    f = njit(lambda a, b, c: (min(a, b, c), max(c, b, a)))
    low, high = f(a, b, 0.7)
    assert low.partials.tolist() == [1.0, 0.0]  # first of the tied minima
    assert high.value == 0.7 and high.partials.tolist() == [0.0, 0.0]


def test_ufuncs_compile_for_cuda(offline_ptx):
    def kernel(u, out):
        i = cuda.grid(1)
        if i < u.size:
            out[i] = np.sqrt(np.exp(u[i])) + np.arctan2(u[i], 2.0) + np.maximum(u[i], 0.0)

    arr = dual_array_type(types.float32, 1, 4)
    ptx, _ = cuda.compile_ptx(kernel, (arr, arr), cc=offline_ptx)
    assert ".entry" in ptx
