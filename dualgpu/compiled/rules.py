"""Every rule in :mod:`dualgpu.rules` on duals in compiled code, for CPU and CUDA.

Each function the table covers (the rule's primal, its aliases, in-place operators and
numpy ufuncs) gets a typing template for the generic target: a call with duals is typed to
a dual of the primal's float dtype and lowered straight into the caller by
:mod:`dualgpu.compiled.lowering` -- no per-rule function to compile.

The primal is the function the user called (``math.pow`` is not ``**``,
``np.minimum`` is not ``min``), computed by numba's own implementation, so a
dual's value is bit-identical to the plain value. A derivative factor never raises
(``sqrt(0)`` gives an infinite factor, as in a kernel). Where plain ``@njit`` code raises
(``x / 0.0``, see :data:`dualgpu.rules.ZERO_DIVISION_ERRORS`), a caller compiled with numba's
default ``error_model="python"`` raises the same ``ZeroDivisionError``. With
:data:`dualgpu.nansafe.NANSAFE_MODE_ENABLED`, lane products are NaN-safe (a zero partial
stays zero).

Hand-written cases (each says why it cannot come from the table):
comparisons (they return a bool from the values), value-only functions
(``floor``, ``int``... return an integer from the value), ``float(d)`` (an
error: it would drop the partials), math functions without a rule (an error
that names the function and how to add a rule), and the ``Dual`` constructor.
"""
import builtins
import cmath
import math
import operator
import types as pytypes

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.core.extending import overload, register_jitable
from numba.core.target_extension import current_target

from dualgpu import nansafe, rules
from dualgpu.core.dual import Dual
from dualgpu.core.int_power import float_int_power
from dualgpu.core.special import digamma_with
from dualgpu.core.traced_branch import (GLOBAL_BRANCH_MESSAGE, is_global_tracer,
                                        refuse_traced_branch)
from dualgpu.errors import MissingRuleError, complex_dual_message, missing_rule_message
from dualgpu.compiled.attributes import lanes_attribute
from dualgpu.compiled.lowering import RuleSpec, lower_call, register_lowered, rule_codegen, value_of
from dualgpu.compiled.types import (
    DualType,
    float_floor,
    float_trunc,
    float_rint,
    lanes_cast,
    make_dual,
    promote,
    same_bits,
)

__all__ = ["resolve_primal", "result_dtype", "rule_targets", "register_variadic",
           "register_divmod", "GLOBAL_BRANCH_MESSAGE"]

_MODULES = {"math": math, "operator": operator, "builtins": builtins}
#: the derivative of lgamma: numba compiles it on floats and on duals (a Hessian's)
digamma = register_jitable(digamma_with(math.log, math.tan))
#: what the names of the rule table's derivative expressions call in compiled code
_EXPRESSION_IMPLEMENTATIONS = {"floor": float_floor, "trunc": float_trunc, "rint": float_rint,
                               "same": same_bits, "digamma": digamma}
_EXPRESSION_FUNCTIONS = {
    name: _EXPRESSION_IMPLEMENTATIONS.get(name) or getattr(math, name)
    for name in rules.EXPRESSION_FUNCTIONS
}


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


def _rule_call(fn, rule_name, args, primal=None):
    """``(signature, codegen)`` of ``fn(*args)`` (``fn`` called with duals) by the rule
    ``rule_name``, or None where the arguments are not this rule's.

    The rule is looked up when a call is typed (:func:`dualgpu.rules.lookup`), so a rule
    added or replaced with :func:`dualgpu.rules.define` applies to code compiled afterwards.
    ``primal``: the callable computing the value (default: ``fn`` on this target).
    """
    rule = rules.lookup(rule_name)
    nargs = len(rule.derivatives)
    if len(args) != nargs or not any(isinstance(a, DualType) for a in args):
        return None
    if not all(isinstance(a, DualType) or _is_number(a) for a in args):
        return None
    _check_lanes(rule.primal, args)
    primal = _target_primal(fn, rule) if primal is None else primal
    dtype = result_dtype(primal, args)
    tracer = any(isinstance(a, DualType) and a.tracer for a in args)
    zero_division = None if tracer else rules.ZERO_DIVISION_ERRORS.get(_dotted(fn))
    if zero_division and zero_division[0] == "zero to a negative int" and not isinstance(
            args[1], types.Integer):
        zero_division = None  # 0.0 ** -1.0 is inf in plain code too
    quiet_primal = None
    if (rule_name == "pow" and isinstance(args[1], types.Integer)
            and isinstance(args[0], DualType) and _on_cpu()):
        # numba's CPU float ** int raises at 0 whatever the error model: inf, as on GPUs
        quiet_primal = float_int_power
    rules.note_compiled(rule_name)  # compiled code keeps this rule (see rules.define)
    spec = RuleSpec(rule, args, dtype, primal, quiet_primal, zero_division,
                    nansafe.NANSAFE_MODE_ENABLED, _EXPRESSION_FUNCTIONS)
    return spec.result(*args), rule_codegen(spec)


def _definition(nargs, define):
    """A typing definition ``(typingctx, a[, b])`` calling ``define(args)`` (numba reads the
    parameters of a definition to name the call's arguments)."""
    if nargs == 1:
        return lambda typingctx, a: define((a,))
    return lambda typingctx, a, b: define((a, b))


def _register_rule(fn, rule_name, rule):
    """Lower ``fn`` (the rule's primal, an alias, an in-place operator or a ufunc) on duals."""
    register_lowered(fn, _definition(len(rule.derivatives),
                                     lambda args: _rule_call(fn, rule_name, args)),
                     f"dualgpu_{rule_name}")


_refuse_traced_branch = refuse_traced_branch


def _is_global(t):
    return isinstance(t, DualType) and is_global_tracer(t)


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
    """Compare the values (lowered in the caller); global tracers refuse the branch."""
    def values_compared(typingctx, a, b):
        if not _first_order_operands((a, b)) or _is_global(a) or _is_global(b):
            return None
        value_types = (_value_type(a), _value_type(b))
        sig = typingctx.resolve_function_type(typingctx.resolve_value_type(fn), value_types, {})
        if sig is None:
            return None

        def codegen(context, builder, signature, args):
            values = [value_of(context, builder, t, v) for t, v in zip((a, b), args)]
            return lower_call(context, builder, fn, value_types, values)[0]

        return sig.return_type(a, b), codegen

    def global_typer(a, b):  # global sparsity: no branch on a traced value
        if _first_order_operands((a, b)) and (_is_global(a) or _is_global(b)):
            return _global_comparison(fn, isinstance(a, DualType), isinstance(b, DualType))
        return None

    register_lowered(fn, values_compared, f"dualgpu_{fn.__name__}")
    overload(fn)(global_typer)


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
            raise MissingRuleError(missing_rule_message(dotted, len(args)))
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


def _defined_numbers_typer(key):
    """The overload of a defined rule's wrapper: on plain numbers, the primal itself."""
    def typer(*args):
        definition = rules.DEFINED.get(key)
        if definition is None:
            raise MissingRuleError(
                f"{key}: its rule was removed (dualgpu.rules.undefine); define it again.")
        if not all(_is_number(a) for a in args):
            return None  # duals: the lowered rule (_defined_rule_call)
        primal = _jitable(definition.function)
        ns = {"_primal": primal, "__name__": __name__}  # numba rebuilds envs by module
        params = ", ".join("ab"[: len(args)])
        exec(f"def impl({params}):\n    return _primal({params})\n", ns)
        return ns["impl"]

    return typer


def _defined_rule_call(key, args):
    """The lowered rule of a defined wrapper called with duals (None once it is removed)."""
    definition = rules.DEFINED.get(key)
    if definition is None:
        return None  # the numbers overload says it was removed
    return _rule_call(definition.wrapper, key, args, primal=_jitable(definition.function))


#: the plain numbers' implementation compiled with numpy's error model, as the primal's
_JIT_OPTIONS = {"error_model": "numpy"}


def _register_defined(fn, define, nargs, numbers_typer=None):
    """Lower ``fn`` on duals with ``define(args)``; ``numbers_typer``: its plain overload."""
    if fn in _DEFINED_OVERLOADS:
        return
    _DEFINED_OVERLOADS.add(fn)
    register_lowered(fn, _definition(nargs, define), f"dualgpu_defined_{fn.__name__}")
    if numbers_typer is not None:
        if nargs == 1:
            overload(fn, jit_options=_JIT_OPTIONS)(lambda a: numbers_typer(a))
        else:
            overload(fn, jit_options=_JIT_OPTIONS)(lambda a, b: numbers_typer(a, b))


def _on_rule_defined(new, old):
    if new is None:
        return
    nargs = len(new.rule.derivatives)
    key = new.key
    _register_defined(new.wrapper, lambda args: _defined_rule_call(key, args), nargs,
                      _defined_numbers_typer(key))
    for fn in (new.function if new.name.startswith("math.") and key == new.name else None,
               new.ufunc if new.ufunc is not None and new.ufunc.__name__ not in
               rules.NUMPY_UFUNCS else None):
        if fn is not None:  # math.exp2, np.cbrt: numba's own function computes the value
            _register_defined(fn, lambda args, fn=fn: (
                _rule_call(fn, key, args, primal=fn) if key in rules.DEFINED else None), nargs)


rules.subscribe(_on_rule_defined)


# --- hand-written: a structural tracer meeting a complex number is refused by name ---------
# (complex duals: dualgpu.compiled.complex_ops; a tracer has no complex lanes)

_OPERATOR_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*",
                     operator.truediv: "/", operator.pow: "**", operator.iadd: "+=",
                     operator.isub: "-=", operator.imul: "*=", operator.itruediv: "/="}


def _tracer_with_complex(*args):
    return any(isinstance(a, DualType) and a.tracer for a in args) and any(
        isinstance(a, types.Complex) for a in args)


def _refuse_complex(op, symbol):
    def refuse(a, b):
        if _tracer_with_complex(a, b):
            raise TypingError(complex_dual_message(f"{a} {symbol} {b}"))
    overload(op)(refuse)


for _op, _symbol in _OPERATOR_SYMBOLS.items():
    _refuse_complex(_op, _symbol)


def _refuse_cmath(fn):
    def refuse(x, y=None):
        if any(isinstance(a, DualType) and a.tracer for a in (x, y)):
            given = ", ".join(str(a) for a in (x, y) if a is not None)
            raise TypingError(complex_dual_message(f"cmath.{fn.__name__}({given})"))
    overload(fn)(refuse)


# cmath's functions: a tracer there would be a complex computation
for _name in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp",
              "isfinite", "isinf", "isnan", "log", "log10", "phase", "polar", "rect", "sin",
              "sinh", "sqrt", "tan", "tanh"):
    _refuse_cmath(getattr(cmath, _name))


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


def register_divmod(accepts):
    """Overload ``divmod(a, b)`` for argument types that ``accepts``: ``(a // b, a % b)``,
    the two rules of the table (numba computes plain ``divmod`` the same way)."""
    @overload(divmod)
    def _divmod(a, b):
        if accepts((a, b)):
            return lambda a, b: (a // b, a % b)
        return None


register_divmod(_first_order_operands)


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
