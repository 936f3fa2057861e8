"""Every rule of dualgpu.rules, checked against finite differences on every path.

Paths: the pure-Python Dual, compiled CPU code (@njit), and a numba.cuda kernel run
under the CUDA simulator. Real CUDA code generation (PTX) is in test_rules_ptx.py.
"""
import functools
import os

import numpy as np
import pytest
from numba import njit

import dualgpu
from dualgpu import Dual, DualArray, dmath, rules
from dualgpu.core.dual import apply_rule

from rule_harness import (
    BINARY_CASES,
    UNARY_CASES,
    build_function,
    case_id,
    check_results,
    draw_inputs,
    kernel_source,
)

DTYPES = [np.float32, np.float64]
LANES = [1, 3, 8]
KINDS = [("d",), ("d", "d"), ("d", "n"), ("n", "d")]
COUNT = 3  # input points per rule


def cases_for(kinds):
    return UNARY_CASES if len(kinds) == 1 else BINARY_CASES


def make_inputs(kinds, dtype, lanes, seed):
    rng = np.random.default_rng(seed)
    cases = cases_for(kinds)
    xs, ys = draw_inputs(cases, rng, count=COUNT)
    px = rng.normal(size=(COUNT, lanes, len(cases)))
    py = rng.normal(size=(COUNT, lanes, len(cases)))
    return cases, xs, ys, px, py


def operand(kind, values, partials, dtype):
    if kind == "d":
        return DualArray(values.astype(dtype), partials.astype(dtype))
    return values.astype(dtype)


@functools.lru_cache(maxsize=None)
def njit_kernel(kinds):
    return njit(build_function(kernel_source(cases_for(kinds), kinds, cuda_kernel=False),
                               {"math": __import__("math")}))


@functools.lru_cache(maxsize=None)
def cudasim_kernel(kinds):
    from numba.cuda import simulator as sim
    from numba import cuda

    fn = build_function(kernel_source(cases_for(kinds), kinds, cuda_kernel=True),
                        {"math": dmath, "cuda": cuda})
    return sim.jit(fn)


def run_path(path, kinds, dtype, lanes, xs, ys, px, py, cases=None):
    cases = cases_for(kinds) if cases is None else cases
    x = operand(kinds[0], xs, px, dtype)
    y = operand(kinds[1] if len(kinds) > 1 else "n", ys, py, dtype)
    out = dualgpu.dual_array(np.zeros(len(cases)), lanes=lanes, dtype=dtype)
    source = kernel_source(cases, kinds, cuda_kernel=path == "cudasim")
    if path == "njit":
        kernel = (njit_kernel(kinds) if cases is cases_for(kinds)
                  else njit(build_function(source, {"math": __import__("math")})))
        kernel(x, y, out)
    elif path == "cudasim":
        if cases is cases_for(kinds):
            kernel = cudasim_kernel(kinds)
        else:
            from numba import cuda
            from numba.cuda import simulator as sim

            kernel = sim.jit(build_function(source, {"math": dmath, "cuda": cuda}))
        kernel[1, 1](x, y, out)
    else:  # pure Python, element by element
        build_function(source, {"math": dmath})(x, y, out)
    return out


@functools.lru_cache(maxsize=None)
def all_rules_at_once(path, dtype, lanes, kinds):
    """Every rule of ``kinds`` in one kernel, run once per input row: (inputs, outputs) or the
    error.

    One kernel per (path, dtype, lanes, kinds) keeps compilation cheap; each rule's test then
    checks its own entry. If the shared kernel fails to build, each rule's test runs its rule
    alone, so only a broken rule fails.
    """
    cases, xs, ys, px, py = make_inputs(kinds, dtype, lanes, seed=lanes * 10 + len(kinds))
    try:
        outs = [run_path(path, kinds, dtype, lanes, xs[row], ys[row], px[row], py[row])
                for row in range(COUNT)]
    except Exception as error:  # noqa: BLE001  (reported by each rule's own test)
        outs = error
    return (cases, xs, ys, px, py), outs


#: DUALGPU_TEST_CASES=all runs the whole path x dtype x lanes product on every path
FULL_PRODUCT = os.environ.get("DUALGPU_TEST_CASES", "").strip().lower() == "all"


def rule_params():
    """One (kinds, case index) per rule case and argument kinds, with the rule's name in the id."""
    return [pytest.param(kinds, k, id=case_id(case, kinds))
            for kinds in KINDS for k, case in enumerate(cases_for(kinds))]


def path_params():
    """(path, dtype, lanes, kinds, index): every rule on every path and dtype.

    The python and cudasim paths run every lane count (they compile nothing). The njit path
    compiles one kernel per (dtype, lanes, kinds), about 2.5 s each, so by default it samples
    the lane count as JAX's ``sample_product`` does: one per (dtype, kinds), cycling over
    LANES, so each lane count still meets each dtype and several argument kinds.
    ``DUALGPU_TEST_CASES=all`` runs the full product.
    """
    params = []
    for path in ("python", "njit", "cudasim"):
        for d, dtype in enumerate(DTYPES):
            for k, kinds in enumerate(KINDS):
                for lanes in LANES:
                    if (path == "njit" and not FULL_PRODUCT
                            and lanes != LANES[(d + k) % len(LANES)]):
                        continue
                    for rule in rule_params():
                        if rule.values[0] != kinds:
                            continue
                        params.append(pytest.param(
                            path, dtype, lanes, *rule.values,
                            id=f"{path}-{np.dtype(dtype).name}-{lanes}-{rule.id}"))
    return params


@pytest.mark.parametrize("path, dtype, lanes, kinds, index", path_params())
def test_rule_matches_finite_differences(path, dtype, lanes, kinds, index):
    (cases, xs, ys, px, py), outs = all_rules_at_once(path, dtype, lanes, kinds)
    where = f"{path} {np.dtype(dtype).name} N={lanes} {''.join(kinds)}"
    if isinstance(outs, Exception):  # the shared kernel failed: try this rule alone
        alone = [cases[index]]
        outs = [run_path(path, kinds, dtype, lanes, xs[row][[index]], ys[row][[index]],
                         px[row][:, [index]], py[row][:, [index]], cases=alone)
                for row in range(COUNT)]
        cases, xs, ys = alone, xs[:, [index]], ys[:, [index]]
        px, py, index = px[:, :, [index]], py[:, :, [index]], 0
    for row in range(COUNT):
        out = outs[row]
        assert out.dtype == np.dtype(dtype)
        check_results(cases, kinds, xs[row], ys[row], px[row], py[row], out.values, out.partials,
                      dtype, where=where, only=index)


def test_every_rule_has_tests_named_after_it():
    # `pytest -k NAME` selects a rule's tests: each test id starts with the case's name
    ids = [param.id for param in rule_params()]
    for name in set(rules.UNARY_RULES) | set(rules.BINARY_RULES):
        assert any(i.startswith(f"{name}-") for i in ids), name
    assert len(ids) == len(set(ids))


def test_rule_table_is_fully_covered_by_the_harness():
    names = {c[2] for c in UNARY_CASES + BINARY_CASES}
    assert names == set(rules.UNARY_RULES) | set(rules.BINARY_RULES)


# --- exact values at points with known derivatives ----------------------------------

KNOWN = [
    ("sin", 0.0, 1.0),
    ("cos", 0.0, 0.0),
    ("exp", 0.0, 1.0),
    ("log", 1.0, 1.0),
    ("sqrt", 4.0, 0.25),
    ("atan", 0.0, 1.0),
    ("tanh", 0.0, 1.0),
    ("erf", 0.0, 2.0 / np.sqrt(np.pi)),
    ("abs", 0.0, 1.0),  # convention: right derivative at 0
    ("abs", -2.0, -1.0),
    ("fabs", 0.0, 1.0),
]


@pytest.mark.parametrize("name,x,slope", KNOWN)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_known_derivatives_python_and_njit(name, x, slope, dtype):
    d = Dual(dtype(x), np.array([1.0, -2.0], dtype))
    py = apply_rule(name, d)
    fn = njit(build_function(
        "def kernel(xs, ys, out):\n    out[0] = " + _text(name, "xs[0]"),
        {"math": __import__("math")}))
    out = dualgpu.dual_array(np.zeros(1), lanes=2, dtype=dtype)
    fn(DualArray(np.array([x], dtype), np.array([[1.0], [-2.0]], dtype)), None, out)
    for got in (py.partials, out.partials[:, 0]):
        np.testing.assert_allclose(got, [slope, -2 * slope], rtol=1e-6, atol=0)


def _text(name, x):
    from rule_harness import call_text
    case = next(c for c in UNARY_CASES if c[2] == name)
    return call_text(case, x)


def test_non_differentiable_conventions():
    a = Dual(1.0, [1.0, 0.0])
    b = Dual(1.0, [0.0, 1.0])
    # min/max ties take the first argument's partials, in Python and compiled code
    assert min(a, b).partials.tolist() == [1.0, 0.0]
    assert apply_rule("max", b, a).partials.tolist() == [0.0, 1.0]
    tie = njit(lambda p, q: (min(p, q), max(q, p)))(a, b)
    assert tie[0].partials.tolist() == [1.0, 0.0]
    assert tie[1].partials.tolist() == [0.0, 1.0]
    # hypot(0, 0) has zero partials; sqrt(0) an infinite factor
    z = Dual(0.0, [1.0, 0.0])
    assert dmath.hypot(z, z).partials.tolist() == [0.0, 0.0]
    assert np.isinf(dmath.sqrt(z).partials[0])
    # 0 ** y contributes nothing through y
    assert (0.0 ** Dual(2.0, [1.0, 0.0])).partials.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_value_only_functions_act_on_the_value(dtype):
    import math

    d = Dual(dtype(2.7), np.array([1.0], dtype))
    f = njit(lambda d: (math.floor(d), math.ceil(d), math.trunc(d), int(d), round(d),
                        math.isnan(d), math.isinf(d), math.isfinite(d), d < 3.0, d != 2.5))
    expected = (2, 3, 2, 2, 3, False, False, True, True, True)
    assert f(d) == expected
    assert (math.floor(d), math.ceil(d), math.trunc(d), int(d), round(d)) == expected[:5]
    assert (dmath.isnan(d), dmath.isinf(d), dmath.isfinite(d), d < 3.0) == expected[5:9]


def test_float32_stays_float32_in_python():
    d = Dual(np.float32(0.3), np.array([1.0, 2.0], np.float32))
    for name in rules.UNARY_RULES:
        assert apply_rule(name, d).dtype == np.float32, name
    assert (d * np.float32(2)).dtype == np.float32
    assert (d * d).dtype == np.float32
