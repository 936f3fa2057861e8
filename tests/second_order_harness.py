"""Hessians of the rule table's functions, and the references they are checked against.

Each case of rule_harness (every rule, written as a user writes it) is evaluated on
nested duals seeded so that the result holds the value, the gradient twice (inner and
outer lanes) and the 2x2 Hessian in (x, y). The reference Hessian is the central
difference (5 points) of the *first-order* gradient, computed with float64 first-order
duals (themselves checked against finite differences of the primal in test_rules.py);
some rules also have analytic second derivatives, checked too.
"""
import math

import numpy as np

import dualgpu
from dualgpu import Dual, DualArray, dmath, rules

from rule_harness import INPLACE_SYNTAX, call_text, five_point

#: Analytic Hessians [[f_xx, f_xy], [f_yx, f_yy]] where they are short to write.
ANALYTIC = {
    "sin": lambda x, y: [[-math.sin(x), 0], [0, 0]],
    "cos": lambda x, y: [[-math.cos(x), 0], [0, 0]],
    "tan": lambda x, y: [[2 * math.tan(x) / math.cos(x) ** 2, 0], [0, 0]],
    "exp": lambda x, y: [[math.exp(x), 0], [0, 0]],
    "log": lambda x, y: [[-1 / x ** 2, 0], [0, 0]],
    "sqrt": lambda x, y: [[-0.25 * x ** -1.5, 0], [0, 0]],
    "tanh": lambda x, y: [[-2 * math.tanh(x) * (1 - math.tanh(x) ** 2), 0], [0, 0]],
    "atan": lambda x, y: [[-2 * x / (1 + x * x) ** 2, 0], [0, 0]],
    "sinh": lambda x, y: [[math.sinh(x), 0], [0, 0]],
    "erf": lambda x, y: [[-4 * x / math.sqrt(math.pi) * math.exp(-x * x), 0], [0, 0]],
    "mul": lambda x, y: [[0, 1], [1, 0]],
    "truediv": lambda x, y: [[0, -1 / y ** 2], [-1 / y ** 2, 2 * x / y ** 3]],
    "pow": lambda x, y: [
        [y * (y - 1) * x ** (y - 2), x ** (y - 1) * (1 + y * math.log(x))],
        [x ** (y - 1) * (1 + y * math.log(x)), x ** y * math.log(x) ** 2]],
    "hypot": lambda x, y: [[y * y / math.hypot(x, y) ** 3, -x * y / math.hypot(x, y) ** 3],
                           [-x * y / math.hypot(x, y) ** 3, x * x / math.hypot(x, y) ** 3]],
}


def python_function(case):
    """The case as a Python function of (x, y) on dmath (works on any dual)."""
    if case[4]:
        source = f"def fn(x, y):\n    t = x\n    t {case[4]} y\n    return t\n"
    else:
        source = f"def fn(x, y):\n    return {call_text(case, 'x', 'y')}\n"
    namespace = {"math": dmath}
    exec(source, namespace)
    return namespace["fn"]


def smooth_inputs(cases, rng, count):
    """Points of each case's domain away from kinks (abs, min/max, copysign) and jumps."""
    xs = np.empty((count, len(cases)))
    ys = np.ones((count, len(cases)))
    for k, case in enumerate(cases):
        rule = rules.UNARY_RULES.get(case[2]) or rules.BINARY_RULES[case[2]]
        for row in range(count):
            while True:
                x = rng.uniform(*rule.domain[0])
                y = rng.uniform(*rule.domain[1]) if case[3] == 2 else 1.0
                name = case[2]
                if name in ("abs", "fabs") and abs(x) < 0.1:
                    continue
                if name in ("min", "max") and abs(x - y) < 0.1:
                    continue
                if name == "copysign" and abs(y) < 0.1:
                    continue
                if name in ("mod", "floordiv", "fmod") and abs(x / y - round(x / y)) < 0.05:
                    continue
                break
            xs[row, k], ys[row, k] = x, y
    return xs, ys


def first_order_gradient(fn, x, y, kinds):
    """(df/dx, df/dy) at (x, y) with float64 first-order duals (0 for constant operands)."""
    args = []
    for lane, (kind, v) in enumerate(zip(("d", "d"), (x, y))):
        args.append(Dual(float(v), np.eye(2)[lane]))
    if kinds[0] == "n":
        args[0] = float(x)
    if len(kinds) < 2 or kinds[1] == "n":
        args[1] = float(y)
    out = fn(*args)
    if not isinstance(out, Dual):  # min/max returned the constant
        return np.zeros(2)
    return np.asarray(out.partials, dtype=np.float64)


def reference_hessian(case, x, y, kinds):
    """Central differences (5 points) of the first-order gradient; rows: d/dx, d/dy of it."""
    fn = python_function(case)
    hx = 1e-3 * max(1.0, abs(x))
    hy = 1e-3 * max(1.0, abs(y))
    active = [kinds[0] == "d", case[3] == 2 and kinds[-1] == "d"]
    hessian = np.zeros((2, 2))
    if active[0]:
        hessian[:, 0] = five_point(lambda t: first_order_gradient(fn, t, y, kinds), x, hx)
    if active[1]:
        hessian[:, 1] = five_point(lambda t: first_order_gradient(fn, x, t, kinds), y, hy)
    return first_order_gradient(fn, x, y, kinds), hessian


def nested_scalar(value, lane, dtype):
    """A tag-1 dual of tag-0 duals, seeded along ``lane`` (0: x, 1: y) in both levels."""
    seed = np.eye(2, dtype=dtype)[lane]
    inner = Dual(dtype(value), seed)
    outer = [Dual(dtype(seed[k]), np.zeros(2, dtype)) for k in range(2)]
    return Dual(inner, outer, tag=1)


def nested_array(values, lane, dtype):
    """Nested DualArray of ``values`` (1-D), seeded along ``lane`` in both levels."""
    n = len(values)
    inner_partials = np.zeros((2, n), dtype)
    inner_partials[lane] = 1
    outer_values = np.zeros((2, n), dtype)
    outer_values[lane] = 1
    return DualArray(DualArray(np.asarray(values, dtype), inner_partials),
                     DualArray(outer_values, np.zeros((2, 2, n), dtype)), tag=1)


def empty_nested(n, dtype):
    return DualArray(DualArray(np.zeros(n, dtype), np.zeros((2, n), dtype)),
                     DualArray(np.zeros((2, n), dtype), np.zeros((2, 2, n), dtype)), tag=1)


def parts_of_scalar(result):
    """(value, inner gradient, outer gradient, Hessian[outer, inner]) of a nested scalar result.

    Python's ``min``/``max`` return one of their arguments: a plain number when the constant
    wins, whose derivatives are all zero.
    """
    if not isinstance(result, Dual):
        return float(result), np.zeros(2), np.zeros(2), np.zeros((2, 2))
    value = float(result.value.value)
    inner = np.asarray(result.value.partials, np.float64)
    outer = np.array([float(p.value) for p in result.partials])
    hessian = np.array([np.asarray(p.partials, np.float64) for p in result.partials])
    return value, inner, outer, hessian


def parts_of_array(out, k):
    """The same parts of element ``k`` of a nested DualArray result."""
    value = float(out.values.values[k])
    inner = out.values.partials[:, k].astype(np.float64)
    outer = out.partials.values[:, k].astype(np.float64)
    hessian = out.partials.partials[:, :, k].T.astype(np.float64)  # [outer, inner]
    return value, inner, outer, hessian


TOLERANCES = {
    np.dtype(np.float64): dict(value=1e-12, gradient=1e-10, hessian=(1e-6, 1e-7)),
    np.dtype(np.float32): dict(value=2e-6, gradient=2e-5, hessian=(2e-3, 2e-3)),
}


def check_case(case, kinds, x, y, parts, dtype, where):
    """Compare one case's nested result with the references; AssertionError names the case."""
    tol = TOLERANCES[np.dtype(dtype)]
    x = float(np.asarray(x, dtype))
    y = float(np.asarray(y, dtype))
    value, inner, outer, hessian = parts
    gradient, expected = reference_hessian(case, x, y, kinds)
    primal = python_function(case)(x, y)
    label = f"[{where}] {case[0]} {''.join(kinds)} at x={x!r}, y={y!r} ({np.dtype(dtype).name})"
    scale = max(1.0, abs(primal))
    assert abs(value - primal) <= tol["value"] * scale, f"{label}: value {value} vs {primal}"
    gscale = max(1.0, np.abs(gradient).max())
    for name, got in (("inner", inner), ("outer", outer)):
        assert np.allclose(got, gradient, rtol=tol["gradient"], atol=tol["gradient"] * gscale), (
            f"{label}: {name} gradient {got.tolist()} vs first order {gradient.tolist()}")
    rtol, atol = tol["hessian"]
    hscale = max(1.0, np.abs(expected).max())
    assert np.allclose(hessian, expected, rtol=rtol, atol=atol * hscale), (
        f"{label}: Hessian {hessian.tolist()} vs central differences of the gradient "
        f"{expected.tolist()}")
    if kinds == ("d", "d"):
        assert abs(hessian[0, 1] - hessian[1, 0]) <= atol * hscale, f"{label}: not symmetric"
    analytic = ANALYTIC.get(case[2])
    if analytic is not None:
        exact = np.array(analytic(x, y), dtype=np.float64)
        mask = np.outer([kinds[0] == "d", case[3] == 2 and kinds[-1] == "d"],
                        [kinds[0] == "d", case[3] == 2 and kinds[-1] == "d"])
        exact = np.where(mask, exact, 0.0)
        assert np.allclose(hessian, exact, rtol=rtol, atol=atol * hscale), (
            f"{label}: Hessian {hessian.tolist()} vs analytic {exact.tolist()}")


def operands(kinds, xs, ys, dtype, scalar):
    """The two operands of every case: nested (kind 'd') or plain (kind 'n')."""
    make = nested_scalar if scalar else nested_array
    plain = np.dtype(dtype).type if scalar else (lambda v: np.asarray(v, dtype))
    x = make(xs, 0, dtype) if kinds[0] == "d" else plain(xs)
    second = kinds[1] if len(kinds) > 1 else "n"
    y = make(ys, 1, dtype) if second == "d" else plain(ys)
    return x, y


__all__ = ["ANALYTIC", "INPLACE_SYNTAX", "check_case", "dualgpu", "empty_nested", "nested_array",
           "nested_scalar", "operands", "parts_of_array", "parts_of_scalar", "python_function",
           "smooth_inputs"]
