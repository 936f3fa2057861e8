"""numba overloads of every rule in :mod:`dualgpu.rules`, for CPU and CUDA.

For each rule and each mix of dual and plain arguments, the implementation is
generated as Python source, compiled with the rule's derivative expressions
inlined and their literals bound to constants of the result dtype (so float32
duals never compute in float64 unless numba's own promotion asks for it), and
returned from an ``@overload`` template registered for the generic target.

The primal is the function the user called (``math.pow`` is not ``**``,
``np.minimum`` is not ``min``), computed by numba's own implementation, so a
dual's value is bit-identical to the plain value. The implementations are
compiled with numpy's error model: a derivative factor never raises (``sqrt(0)``
gives an infinite factor, as in a kernel). Where plain ``@njit`` code raises
(``x / 0.0``, see :data:`dualgpu.rules.ZERO_DIVISION_ERRORS`), the
implementation generated for a caller with numba's default
``error_model="python"`` raises the same ``ZeroDivisionError``. With
:data:`dualgpu.nansafe.NANSAFE_MODE_ENABLED`, lane products go through the
NaN-safe intrinsics (a zero partial stays zero).

Hand-written cases (each says why it cannot come from the table):
comparisons (they return a bool from the values), value-only functions
(``floor``, ``int``... return an integer from the value), ``float(d)`` (an
error: it would drop the partials), math functions without a rule (an error
that names the function and how to add a rule), and the ``Dual`` constructor.
"""
import builtins
import math
import operator
import re
import types as pytypes

import numpy as np
from numba import types
from numba.core import targetconfig
from numba.core.errors import TypingError
from numba.core.extending import overload, register_jitable
from numba.core.target_extension import current_target

from dualgpu import nansafe, rules
from dualgpu.core._expressions import expression
from dualgpu.core.dual import Dual
from dualgpu.core.int_power import float_int_power
from dualgpu.errors import MissingRuleError, complex_dual_message, missing_rule_message
from dualgpu.compiled.attributes import lanes_attribute
from dualgpu.compiled.types import (
    DualType,
    float_floor,
    float_trunc,
    float_rint,
    lanes_add,
    lanes_axpby,
    lanes_axpby_nansafe,
    lanes_cast,
    lanes_neg,
    lanes_or,
    lanes_scale,
    lanes_scale_nansafe,
    lanes_sub,
    lanes_zero,
    make_dual,
    promote,
    same_bits,
)

__all__ = ["resolve_primal", "result_dtype", "rule_targets", "register_variadic",
           "GLOBAL_BRANCH_MESSAGE"]

_MODULES = {"math": math, "operator": operator, "builtins": builtins}
#: what the expression functions of the rule table mean in compiled code
_EXPRESSION_IMPLEMENTATIONS = {"floor": float_floor, "trunc": float_trunc, "rint": float_rint,
                               "same": same_bits}
_NUMBA_NAMESPACE = {
    name: _EXPRESSION_IMPLEMENTATIONS.get(name) or getattr(math, name)
    for name in rules.EXPRESSION_FUNCTIONS
}
#: compiled implementations: derivative factors never raise (see the module docstring)
_JIT_OPTIONS = {"error_model": "numpy"}
_NUMBA_NAMESPACE.update(
    _make_dual=make_dual,
    _lanes_scale=lanes_scale_nansafe if nansafe.NANSAFE_MODE_ENABLED else lanes_scale,
    _lanes_axpby=lanes_axpby_nansafe if nansafe.NANSAFE_MODE_ENABLED else lanes_axpby,
    _lanes_add=lanes_add,
    _lanes_sub=lanes_sub,
    _lanes_neg=lanes_neg,
    _lanes_cast=lanes_cast,
    _lanes_zero=lanes_zero,
    _lanes_or=lanes_or,
)


def resolve_primal(dotted):
    """Return the Python callable named ``"module.name"``."""
    module, _, name = dotted.rpartition(".")
    return getattr(_MODULES[module], name)


def _dotted(fn):
    """``"module.name"`` of a math/operator/builtins callable (None for ufuncs)."""
    for module_name, module in _MODULES.items():
        name = getattr(fn, "__name__", None)
        if name and getattr(module, name, None) is fn:
            return f"{module_name}.{name}"
    return None


def _caller_raises():
    """True when the function being compiled uses numba's ``error_model="python"`` (@njit)."""
    flags = targetconfig.ConfigStack.top_or_none()
    return getattr(flags, "error_model", "numpy") == "python"


def _on_cpu():
    try:
        return current_target() == "cpu"
    except Exception:  # pragma: no cover - no target on the stack: the CPU
        return True


def _target_primal(fn, rule):
    """The primal compiled for ``fn`` on the current target.

    ``fn`` itself, except a numpy ufunc that the target cannot lower on scalars
    (numba.cuda lowers only some, e.g. not ``np.exp``): plain code calling it would
    not compile there, so the rule's own primal (``math.exp``) stands in.
    """
    if not isinstance(fn, np.ufunc):
        return fn
    try:
        target = current_target()
    except Exception:  # pragma: no cover - no target on the stack: the CPU
        target = "cpu"
    if target == "cuda":
        from numba.cuda.ufuncs import ufunc_db

        if fn not in ufunc_db():
            return resolve_primal(rule.primal)
    return fn


def _is_number(ty):
    return isinstance(ty, (types.Float, types.Integer, types.Boolean))


def _value_type(ty):
    return ty.dtype if isinstance(ty, DualType) else ty


def result_dtype(primal, arg_types):
    """The float type numba gives ``primal`` on the values' types (float32/float64)."""
    from numba.core.registry import cpu_target

    values = tuple(_value_type(t) for t in arg_types)
    context = cpu_target.typing_context
    context.refresh()  # a context not yet refreshed misses templates (float32 ** int64)
    try:
        sig = context.resolve_function_type(primal, values, {})
    except Exception:  # pragma: no cover - typing errors fall back to promotion
        sig = None
    if sig is not None and sig.return_type in (types.float32, types.float64):
        return sig.return_type
    return promote(*values)


def _check_lanes(name, arg_types):
    duals = [t for t in arg_types if isinstance(t, DualType)]
    if len({t.tracer for t in duals}) > 1:
        raise TypingError(
            f"{name}: a structural tracer cannot be combined with a tangent dual; "
            "sparsity detection must seed every input as a tracer."
        )
    lanes = {t.n for t in duals}
    if len(lanes) > 1:
        raise TypingError(
            f"{name}: duals with different lane counts {sorted(lanes)} cannot be combined; "
            "seed every dual input of one computation with the same N."
        )


_IMPL_CACHE = {}


def _generate_tracer(rule_name, rule, kinds, dtype, primal):
    """Structural tracer: the answer depends on every dual argument whose factor is not 0."""
    params = ["a", "b"][: len(kinds)]
    values = [f"{p}.value" if kind == "d" else p for p, kind in zip(params, kinds)]
    deps = [
        f"{p}.partials" for p, kind, text in zip(params, kinds, rule.derivatives)
        if kind == "d" and expression(text).unit != 0
    ]
    if not deps:
        lanes = f"_lanes_zero({params[kinds.index('d')]})"
    elif len(deps) == 1:
        lanes = deps[0]
    else:
        lanes = f"_lanes_or({deps[0]}, {deps[1]})"
    source = (
        f"def impl({', '.join(params)}):\n"
        f"    return _make_dual(_T(_primal({', '.join(values)})), {lanes})\n"
    )
    ns = dict(_NUMBA_NAMESPACE)
    ns["_T"] = np.float32 if dtype == types.float32 else np.float64
    ns["_primal"] = primal
    exec(compile(source, f"<dualgpu tracer rule {rule_name} {kinds} {dtype}>", "exec"), ns)
    return ns["impl"]


def _generate(rule_name, rule, kinds, dtype, tracer=False, primal=None, zero_division=None):
    """Generate the implementation for a rule and a tuple of 'd'/'n' argument kinds.

    ``primal`` is the callable computing the value (default: the rule's);
    ``zero_division`` a ``(condition, message)`` of
    :data:`dualgpu.rules.ZERO_DIVISION_ERRORS` to raise ZeroDivisionError where
    plain @njit code does, or None.
    """
    primal = resolve_primal(rule.primal) if primal is None else primal
    key = (rule_name, rule.derivatives, kinds, dtype, tracer, primal, zero_division,
           nansafe.NANSAFE_MODE_ENABLED)
    if key in _IMPL_CACHE:
        return _IMPL_CACHE[key]
    if tracer:
        _IMPL_CACHE[key] = _generate_tracer(rule_name, rule, kinds, dtype, primal)
        return _IMPL_CACHE[key]
    nargs = len(kinds)
    params = ["a", "b"][:nargs]
    values = [f"{p}.value" if kind == "d" else p for p, kind in zip(params, kinds)]
    ns = dict(_NUMBA_NAMESPACE)
    ns["_T"] = np.float32 if dtype == types.float32 else np.float64
    ns["_primal"] = primal
    lines = [f"def impl({', '.join(params)}):"]
    names = ["x", "y"][:nargs]
    for name, value in zip(names, values):
        lines.append(f"    {name} = _T({value})")
    if zero_division is not None and nargs == 2:
        condition, message = zero_division
        test = {"zero divisor": f"{values[1]} == 0",
                "zero to a negative int": f"{values[1]} < 0 and {values[0]} == 0"}[condition]
        lines.append(f"    if {test}:")
        lines.append(f"        raise ZeroDivisionError({message!r})")
    lines.append(f"    ans = _T(_primal({', '.join(values)}))")
    terms = []  # _Term per dual argument whose factor is not identically 0
    for k, kind in enumerate(kinds):
        if kind != "d":
            continue
        expr = expression(rule.derivatives[k])
        for cname, cvalue in expr.constants.items():
            ns[f"{cname}_{k}"] = ns["_T"](cvalue)
        if expr.unit == 0:
            continue

        def rename(src, k=k):
            return re.sub(r"\b(_c\d+)\b", rf"\1_{k}", src)

        partials = f"{params[k]}.partials"
        if expr.gate is not None:
            # "A if test else 0": inactive, the term contributes nothing (not 0 * partials)
            gate = expr.gate
            lines.append(f"    g{k} = {'' if gate.when else 'not '}({rename(gate.test)})")
            if gate.unit != 0:
                terms.append(_Term(k, gate.unit, rename(gate.source), partials, f"g{k}"))
            continue
        if expr.unit is None:
            lines.append(f"    f{k} = _T({rename(expr.source)})")
        terms.append(_Term(k, expr.unit, None, partials, None))
    _emit_lanes(lines, terms, [t for t in terms if t.gate], "    ", params, kinds)
    lines.append("    return _make_dual(ans, lanes)")
    source = "\n".join(lines)
    exec(compile(source, f"<dualgpu rule {rule_name} {kinds} {dtype}>", "exec"), ns)
    impl = ns["impl"]
    impl.__dualgpu_source__ = source
    _IMPL_CACHE[key] = impl
    return impl


class _Term:
    """One argument's contribution: ``factor * partials``, possibly behind a gate."""

    __slots__ = ("k", "unit", "source", "partials", "gate")

    def __init__(self, k, unit, source, partials, gate):
        self.k, self.unit, self.source, self.partials, self.gate = k, unit, source, partials, gate


def _emit_lanes(lines, terms, gated, indent, params, kinds):
    """Append code computing ``lanes`` from the active terms, one branch per gate."""
    if gated:
        gate = gated[0]
        lines.append(f"{indent}if {gate.gate}:")
        _emit_lanes(lines, terms, gated[1:], indent + "    ", params, kinds)
        lines.append(f"{indent}else:")
        _emit_lanes(lines, [t for t in terms if t is not gate], gated[1:], indent + "    ",
                    params, kinds)
        return
    for t in terms:
        if t.gate and t.unit is None:  # a gated factor is computed only where it is active
            lines.append(f"{indent}f{t.k} = _T({t.source})")
    lines.append(f"{indent}lanes = {_combine(terms, params, kinds)}")


def _combine(terms, params, kinds):
    """The lane expression for up to two active terms (units cost no multiplication)."""
    if not terms:
        first = kinds.index("d")
        return f"_lanes_cast(ans, _lanes_zero({params[first]}))"
    if len(terms) == 1:
        t = terms[0]
        return {1: f"_lanes_cast(ans, {t.partials})", -1: f"_lanes_neg(ans, {t.partials})"}.get(
            t.unit, f"_lanes_scale(f{t.k}, {t.partials})")
    a, b = terms
    if (a.unit, b.unit) == (1, 1):
        return f"_lanes_add(ans, {a.partials}, {b.partials})"
    if (a.unit, b.unit) == (1, -1):
        return f"_lanes_sub(ans, {a.partials}, {b.partials})"
    fa = {1: "_T(1)", -1: "_T(-1)"}.get(a.unit, f"f{a.k}")
    fb = {1: "_T(1)", -1: "_T(-1)"}.get(b.unit, f"f{b.k}")
    return f"_lanes_axpby({fa}, {a.partials}, {fb}, {b.partials})"


def _rule_implementation(fn, rule_name, args, primal=None):
    """The implementation of ``fn(*args)`` (``fn`` called with duals) by the rule ``rule_name``.

    The rule is looked up when a call is typed (:func:`dualgpu.rules.lookup`), so a rule
    added or replaced with :func:`dualgpu.rules.define` applies to code compiled afterwards.
    ``primal``: the callable computing the value (default: ``fn`` on this target).
    """
    rule = rules.lookup(rule_name)
    nargs = len(rule.derivatives)
    zero_division = rules.ZERO_DIVISION_ERRORS.get(_dotted(fn))
    if len(args) != nargs or not any(isinstance(a, DualType) for a in args):
        return None
    if not all(isinstance(a, DualType) or _is_number(a) for a in args):
        return None
    _check_lanes(rule.primal, args)
    kinds = tuple("d" if isinstance(a, DualType) else "n" for a in args)
    primal = _target_primal(fn, rule) if primal is None else primal
    dtype = result_dtype(primal, args)
    tracer = any(isinstance(a, DualType) and a.tracer for a in args)
    raises = zero_division if _caller_raises() else None
    if raises and raises[0] == "zero to a negative int" and not isinstance(
            args[1], types.Integer):
        raises = None  # 0.0 ** -1.0 is inf in plain code too
    if (rule_name == "pow" and not raises and isinstance(args[1], types.Integer)
            and isinstance(args[0], DualType) and _on_cpu()):
        # numba's CPU float ** int raises at 0 whatever the error model: inf, as on GPUs
        primal = float_int_power
    rules.note_compiled(rule_name)  # compiled code keeps this rule (see rules.define)
    return _generate(rule_name, rule, kinds, dtype, tracer, primal, raises)


def _register_rule(fn, rule_name, rule):
    """Overload ``fn`` (the rule's primal, an alias, an in-place operator or a ufunc)."""
    nargs = len(rule.derivatives)

    def typer(*args):
        return _rule_implementation(fn, rule_name, args)

    if nargs == 1:
        overload(fn, jit_options=_JIT_OPTIONS)(lambda a: typer(a))
    else:
        overload(fn, jit_options=_JIT_OPTIONS)(lambda a, b: typer(a, b))


#: Raised (from compiled code) where a global sparsity tracer meets a branch on a traced value;
#: :func:`dualgpu.autodiff.sparse.detect_sparsity` turns it into a DualgpuError that names the fix.
GLOBAL_BRANCH_MESSAGE = (
    "dualgpu global sparsity: a kernel compares, rounds or converts a value that depends on "
    "the input")


@register_jitable
def _refuse_traced_branch(partials):
    for lane in partials:
        if lane != 0:
            raise ValueError(GLOBAL_BRANCH_MESSAGE)


def _is_global(t):
    return isinstance(t, DualType) and t.tracer == "global"


def _register_value_only(fn, dotted):
    def typer(*args):
        if not any(isinstance(a, DualType) for a in args):
            return None
        if len(args) == 1 and _is_global(args[0]):
            def refuse(x):
                _refuse_traced_branch(x.partials)
                return fn(x.value)
            return refuse
        if len(args) == 1:
            return lambda x: fn(x.value)
        return None

    overload(fn)(lambda x: typer(x))
    if fn is round:  # round(x, ndigits): a float of the value (zero derivative), as on floats
        overload(fn)(_round_ndigits_typer(DualType))


def _round_ndigits_typer(dual_type):
    """The overload of ``round(dual, ndigits)``: ``round(x.value, ndigits)``, as for a float."""
    def typer(x, ndigits):
        if isinstance(x, dual_type) and isinstance(ndigits, types.Integer):
            if _is_global(x):
                def refuse(x, ndigits):
                    _refuse_traced_branch(x.partials)
                    return round(x.value, ndigits)
                return refuse
            return lambda x, ndigits: round(x.value, ndigits)
        return None

    return typer


def _register_comparison(fn):
    def typer(a, b):
        if not (isinstance(a, DualType) or isinstance(b, DualType)):
            return None
        if not all(isinstance(t, DualType) or _is_number(t) for t in (a, b)):
            return None
        if _is_global(a) or _is_global(b):  # global sparsity: no branch on a traced value
            return _global_comparison(fn, isinstance(a, DualType), isinstance(b, DualType))
        if isinstance(a, DualType) and isinstance(b, DualType):
            return lambda a, b: fn(a.value, b.value)
        if isinstance(a, DualType):
            return lambda a, b: fn(a.value, b)
        return lambda a, b: fn(a, b.value)

    overload(fn)(typer)


def _global_comparison(fn, a_dual, b_dual):
    if a_dual and b_dual:
        def both(a, b):
            _refuse_traced_branch(a.partials)
            _refuse_traced_branch(b.partials)
            return fn(a.value, b.value)
        return both
    if a_dual:
        def left(a, b):
            _refuse_traced_branch(a.partials)
            return fn(a.value, b)
        return left

    def right(a, b):
        _refuse_traced_branch(b.partials)
        return fn(a, b.value)
    return right


def _register_missing(fn, dotted):
    def typer(*args):
        if any(isinstance(a, DualType) for a in args):
            if rules.definition_of(dotted) is not None:
                return None  # a rule added with dualgpu.rules.define: its own overload
            # not a numba TypingError: numba lets other exceptions through as they are, so
            # the user reads this short message instead of a page of candidate signatures
            raise MissingRuleError(missing_rule_message(dotted))
        return None

    overload(fn)(typer)


def rule_targets():
    """Every function the rule table covers, with how to register it.

    Yields ``(kind, function, name, rule)``: ``"rule"`` (a derivative rule: unary and binary
    rules, their aliases, in-place operators and numpy ufuncs; ``name`` is the rule's),
    ``"value_only"`` and ``"comparison"`` (``name`` is the dotted name; no rule) and, for
    every other callable of ``math``, ``"missing"`` (registered to refuse duals by name).
    The plain duals here and the tagged (nested) duals of :mod:`dualgpu.compiled.nested` are
    registered from this one list.
    """
    covered = set()
    for rule_name, rule in {**rules.UNARY_RULES, **rules.BINARY_RULES}.items():
        yield "rule", resolve_primal(rule.primal), rule_name, rule
        covered.add(rule.primal)
    for dotted, rule_name in rules.ALIASES.items():
        rule = rules.BINARY_RULES.get(rule_name) or rules.UNARY_RULES[rule_name]
        yield "rule", resolve_primal(dotted), rule_name, rule
        covered.add(dotted)
    for dotted, rule_name in rules.INPLACE.items():
        yield "rule", resolve_primal(dotted), rule_name, rules.BINARY_RULES[rule_name]
    for ufunc, rule_name in rules.NUMPY_UFUNCS.items():
        rule = rules.BINARY_RULES.get(rule_name) or rules.UNARY_RULES[rule_name]
        yield "rule", getattr(np, ufunc), rule_name, rule
    for dotted in rules.VALUE_ONLY.values():
        yield "value_only", resolve_primal(dotted), dotted, None
        covered.add(dotted)
    for dotted in rules.COMPARISONS.values():
        yield "comparison", resolve_primal(dotted), dotted, None
    for name in dir(math):
        dotted = f"math.{name}"
        fn = getattr(math, name)
        if not name.startswith("_") and callable(fn) and dotted not in covered:
            yield "missing", fn, dotted, None


def _register_all():
    for kind, fn, name, rule in rule_targets():
        if kind == "rule":
            _register_rule(fn, name, rule)
        elif kind == "value_only":
            _register_value_only(fn, name)
        elif kind == "comparison":
            _register_comparison(fn)
        else:
            _register_missing(fn, name)


_register_all()


# --- rules added with dualgpu.rules.define ------------------------------------------------
# (a rules.subscribe listener: each defined wrapper, and each ufunc a rule names, is overloaded
# once; the typers look the rule up when a call is typed, so a redefinition before the first
# compilation applies, and rules.note_compiled makes define refuse one after it)

_DEFINED_OVERLOADS = set()


def _jitable(function):
    """``function`` as compiled code calls it: a Python function (or the Python function of a
    @njit / device function) made callable from compiled code on every target."""
    function = getattr(function, "py_func", function)
    if isinstance(function, pytypes.FunctionType) and function not in _JITABLE:
        _JITABLE.add(function)  # one overload per function, not one per call typed
        register_jitable(function)
    return function


_JITABLE = set()


def _defined_typer(key):
    def typer(*args):
        definition = rules.DEFINED.get(key)
        if definition is None:
            raise MissingRuleError(
                f"{key}: its rule was removed (dualgpu.rules.undefine); define it again.")
        primal = _jitable(definition.function)
        if all(_is_number(a) for a in args):  # plain numbers: the primal itself
            ns = {"_primal": primal, "__name__": __name__}  # numba rebuilds envs by module
            params = ", ".join("ab"[: len(args)])
            exec(f"def impl({params}):\n    return _primal({params})\n", ns)
            return ns["impl"]
        return _rule_implementation(definition.wrapper, key, args, primal=primal)

    return typer


def _overload_defined(fn, typer, nargs):
    if fn in _DEFINED_OVERLOADS:
        return
    _DEFINED_OVERLOADS.add(fn)
    if nargs == 1:
        overload(fn, jit_options=_JIT_OPTIONS)(lambda a: typer(a))
    else:
        overload(fn, jit_options=_JIT_OPTIONS)(lambda a, b: typer(a, b))


def _on_rule_defined(new, old):
    if new is None:
        return
    nargs = len(new.rule.derivatives)
    _overload_defined(new.wrapper, _defined_typer(new.key), nargs)
    key = new.key
    for fn in (new.function if new.name.startswith("math.") and key == new.name else None,
               new.ufunc if new.ufunc is not None and new.ufunc.__name__ not in
               rules.NUMPY_UFUNCS else None):
        if fn is not None:  # math.exp2, np.cbrt: numba's own function computes the value
            _overload_defined(fn, lambda *args, fn=fn: (
                _rule_implementation(fn, key, args, primal=fn) if key in rules.DEFINED
                else None), nargs)


rules.subscribe(_on_rule_defined)


# --- hand-written: complex operands are refused by name ---------------------------------------
# (the table's duals are real; numba would only list the candidates it tried)

_OPERATOR_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                     operator.truediv: "/", operator.pow: "**", operator.iadd: "+=",
                     operator.isub: "-=", operator.imul: "*=", operator.itruediv: "/="}


def _refuse_complex(op, symbol):
    def refuse(a, b):
        if (isinstance(a, DualType) and isinstance(b, types.Complex)) or (
                isinstance(a, types.Complex) and isinstance(b, DualType)):
            raise TypingError(complex_dual_message(f"{a} {symbol} {b}"))
    overload(op)(refuse)


for _op, _symbol in _OPERATOR_SYMBOLS.items():
    _refuse_complex(_op, _symbol)


# --- hand-written: min/max of more than two arguments ----------------------------
# (the table's rule takes two; min(a, b, c) folds it left to right, ties to the first)

def register_variadic(fn, accepts):
    """Overload ``fn`` (``min``, ``max``) for three or more arguments of types that
    ``accepts(args)``: the two-argument overload folded left to right (ties to the first).
    First-order and tagged duals (:mod:`dualgpu.compiled.nested`) share it."""
    def typer(*args):
        if len(args) <= 2 or not accepts(args):
            return None
        folded = "args[0]"
        for k in range(1, len(args)):
            folded = f"_fn({folded}, args[{k}])"
        ns = {"_fn": fn}
        exec(f"def impl(*args):\n    return {folded}\n", ns)
        return ns["impl"]

    overload(fn)(typer)


def _first_order_operands(args):
    """True for argument types among which a dual is and every one is a dual or a number."""
    return any(isinstance(a, DualType) for a in args) and all(
        isinstance(a, DualType) or _is_number(a) for a in args)


register_variadic(min, _first_order_operands)
register_variadic(max, _first_order_operands)


# --- hand-written: conversions that would drop partials ------------------------

def _dropped_partials(what):
    return (
        f"{what}(Dual) would drop the partials. Fix: keep the dual (arithmetic with plain "
        "floats promotes to a dual, and math functions take duals); to cast, "
        "np.float32(d) keeps the partials in compiled code. d.value reads the value "
        "alone and silently drops the derivative: use it only where no derivative must "
        "flow."
    )


@overload(float)
def _float_of_dual(x):
    if isinstance(x, DualType):
        raise TypingError(_dropped_partials("float"))


# --- hand-written: the Dual constructor and attributes in compiled code ----------

@overload(Dual)
def _construct_dual(value, partials):
    if isinstance(value, DualType):
        raise TypingError("Dual(value, partials): value must be a number, not a Dual.")
    if not _is_number(value):
        return None
    if not isinstance(partials, types.UniTuple) or not _is_number(partials.dtype):
        raise TypingError(
            f"Dual(value, partials) in compiled code needs partials as a tuple of numbers, "
            f"e.g. Dual(x, (1.0, 0.0)); got {partials}."
        )
    dtype = value if isinstance(value, types.Float) else types.float64
    T = np.float32 if dtype == types.float32 else np.float64

    def impl(value, partials):
        v = T(value)
        return make_dual(v, lanes_cast(v, partials))

    return impl


lanes_attribute(DualType)
