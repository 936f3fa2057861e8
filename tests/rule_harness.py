"""Generic rule checker: one kernel source per (rule set, argument kinds), three paths.

Every rule in dualgpu.rules is written out as the Python a user would type
(``x + y``, ``math.sin(x)``, ``abs(x)``, ``t = x; t += y``), so the same source is
compiled with @njit, run under the CUDA simulator (with ``math`` made dual-aware,
as the simulator backend does) and compiled to PTX.
"""
import math
import operator

import numpy as np

from dualgpu import rules

OPERATOR_SYNTAX = {
    "operator.neg": "-({0})",
    "operator.pos": "+({0})",
    "builtins.abs": "abs({0})",
    "operator.add": "{0} + {1}",
    "operator.sub": "{0} - {1}",
    "operator.mul": "{0} * {1}",
    "operator.truediv": "{0} / {1}",
    "operator.floordiv": "{0} // {1}",
    "operator.mod": "{0} % {1}",
    "operator.pow": "{0} ** {1}",
    "builtins.min": "min({0}, {1})",
    "builtins.max": "max({0}, {1})",
    "builtins.pow": "pow({0}, {1})",
}
INPLACE_SYNTAX = {
    "operator.iadd": "+=", "operator.isub": "-=", "operator.imul": "*=",
    "operator.itruediv": "/=", "operator.ifloordiv": "//=", "operator.imod": "%=",
    "operator.ipow": "**=",
}

#: (case name, primal dotted name, rule name, arity, how it is written)
CASES = []
for _name, _rule in rules.UNARY_RULES.items():
    CASES.append((_name, _rule.primal, _name, 1, None))
for _name, _rule in rules.BINARY_RULES.items():
    CASES.append((_name, _rule.primal, _name, 2, None))
for _dotted, _name in rules.ALIASES.items():
    CASES.append((_dotted, _dotted, _name, 2, None))
for _dotted, _name in rules.INPLACE.items():
    CASES.append((_dotted, rules.BINARY_RULES[_name].primal, _name, 2, INPLACE_SYNTAX[_dotted]))
UNARY_CASES = [c for c in CASES if c[3] == 1]
BINARY_CASES = [c for c in CASES if c[3] == 2]


def call_text(case, x, y=None):
    """The user-level Python text for one case on operands named x and y."""
    name, dotted, _, arity, inplace = case
    if inplace:
        return None
    if dotted in OPERATOR_SYNTAX:
        return OPERATOR_SYNTAX[dotted].format(x, y)
    args = x if arity == 1 else f"{x}, {y}"
    return f"{dotted}({args})"


def kernel_source(cases, kinds, *, cuda_kernel):
    """Source of ``kernel(xs, ys, out)``: ``out[k] = case_k(xs[k], ys[k])`` for every case."""
    lines = ["def kernel(xs, ys, out):"]
    if cuda_kernel:
        lines.append("    if cuda.grid(1) != 0:")
        lines.append("        return")
    for k, case in enumerate(cases):
        x = f"xs[{k}]"
        y = f"ys[{k}]"
        if case[4]:
            lines.append(f"    t = {x}")
            lines.append(f"    t {case[4]} {y}")
            lines.append(f"    out[{k}] = t")
        else:
            lines.append(f"    out[{k}] = {call_text(case, x, y)}")
    return "\n".join(lines)


def build_function(source, namespace):
    ns = dict(namespace)
    exec(compile(source, "<rule kernel>", "exec"), ns)
    return ns["kernel"]


def resolve(dotted):
    import builtins

    definition = rules.definition_of(dotted)  # a rule added with dualgpu.rules.define
    if definition is not None:
        return getattr(definition.function, "py_func", definition.function)
    module, _, name = dotted.rpartition(".")
    return getattr({"math": math, "operator": operator, "builtins": builtins}[module], name)


def _avoid_discontinuity(rule_name, x, y):
    if rule_name in ("mod", "floordiv", "fmod"):
        q = x / y
        return abs(q - round(q)) > 0.02
    return True


def draw_inputs(cases, rng, *, count):
    """Inputs from each case's domain: arrays xs, ys of shape (count, len(cases)) in float64."""
    xs = np.empty((count, len(cases)))
    ys = np.ones((count, len(cases)))
    for k, case in enumerate(cases):
        rule = rules.UNARY_RULES.get(case[2]) or rules.BINARY_RULES.get(case[2]) or rules.lookup(
            case[2])  # or a rule added with dualgpu.rules.define
        for row in range(count):
            while True:
                x = rng.uniform(*rule.domain[0])
                y = rng.uniform(*rule.domain[1]) if case[3] == 2 else 1.0
                if _avoid_discontinuity(case[2], x, y):
                    break
            xs[row, k], ys[row, k] = x, y
    return xs, ys


def five_point(f, x, h):
    return (-f(x + 2 * h) + 8 * f(x + h) - 8 * f(x - h) + f(x - 2 * h)) / (12 * h)


def reference(case, x, y):
    """float64 value and (d/dx, d/dy) by 5-point central differences."""
    primal = resolve(case[1])
    if case[3] == 1:
        h = 1e-3 * max(1.0, abs(x))
        return primal(x), (five_point(primal, x, h), 0.0)
    hx = 1e-3 * max(1.0, abs(x))
    hy = 1e-3 * max(1.0, abs(y))
    return primal(x, y), (
        five_point(lambda t: primal(t, y), x, hx),
        five_point(lambda t: primal(x, t), y, hy),
    )


TOLERANCES = {
    np.dtype(np.float64): dict(value=dict(rtol=1e-12, atol=1e-12), partials=dict(rtol=1e-7, atol=1e-8)),
    np.dtype(np.float32): dict(value=dict(rtol=2e-6, atol=2e-6), partials=dict(rtol=2e-3, atol=2e-4)),
}


def case_id(case, kinds):
    """A test id that starts with the case's name, so ``pytest -k NAME`` selects it."""
    return f"{case[0]}-{''.join(kinds)}"


def check_results(cases, kinds, xs, ys, px, py, values, partials, dtype, where, only=None):
    """Compare results with the reference; raise AssertionError naming the case and the worst point.

    ``only``: the index of the one case to check (all by default).
    """
    tol = TOLERANCES[np.dtype(dtype)]
    # inputs as the kernel saw them: every operand is stored in dtype
    x_in = xs.astype(dtype).astype(np.float64)
    y_in = ys.astype(dtype).astype(np.float64)
    for k, case in enumerate(cases):
        if only is not None and k != only:
            continue
        value, (dx, dy) = reference(case, x_in[k], y_in[k])
        expected = np.zeros(px.shape[0])
        if kinds[0] == "d":
            expected = expected + dx * px[:, k]
        if case[3] == 2 and kinds[-1] == "d":
            expected = expected + dy * py[:, k]
        got_v = float(values[k])
        got_p = np.asarray(partials[:, k], dtype=np.float64)
        if not np.allclose(got_v, value, **tol["value"]):
            raise AssertionError(
                f"[{where}] {case[0]} value at x={x_in[k]!r}, y={y_in[k]!r}: got {got_v!r}, "
                f"expected {value!r} (dtype {np.dtype(dtype)})"
            )
        if not np.allclose(got_p, expected, **tol["partials"]):
            worst = int(np.argmax(np.abs(got_p - expected)))
            raise AssertionError(
                f"[{where}] {case[0]} partials at x={x_in[k]!r}, y={y_in[k]!r}: lane {worst} "
                f"got {got_p[worst]!r}, finite differences give {expected[worst]!r} "
                f"(all lanes: got {got_p.tolist()}, expected {expected.tolist()}; "
                f"dtype {np.dtype(dtype)})"
            )


def defined_cases(names):
    """Cases for rules added with :func:`dualgpu.rules.define`, called by their dotted names.

    A kernel calls ``mylib.softplus(x)`` (or ``math.exp2(x)``): its namespace needs the
    top-level name (the module ``mylib``, ``math``).
    """
    cases = []
    for name in names:
        definition = rules.definition_of(name)
        arity = len(definition.rule.derivatives)
        cases.append((name, name, definition.key, arity, None))
    return cases


def module_source(cases, kinds, imports):
    """A kernel module: ``imports`` (lines), then :func:`kernel_source` as a numba.cuda kernel."""
    return "\n".join(list(imports) + ["from numba import cuda", "", "",
                                       kernel_source(cases, kinds, cuda_kernel=True), ""])
