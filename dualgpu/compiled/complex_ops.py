"""The complex rules (:mod:`dualgpu.complex_rules`) on complex duals in compiled code, for the
CPU and CUDA alike.

Every function the complex table covers gets an ``@overload`` (generic target) whose
implementation is generated from the table's entry, once per rule, argument kinds, dtype and
lane count:

* the value is the primal the user called on the operands' values (``z * w``,
  ``cmath.exp(z)``, ``abs(z)``), as plain compiled code computes it;
* each dual operand's factor is the table's derivative expression, evaluated in the complex
  work dtype (``cmath`` for the functions it names; its literals constants of that dtype); a
  gated factor (``A if test else 0``) contributes nothing where it is inactive;
* each lane is the tangent of ``factor * partial``: itself (holomorphic), or its real part,
  imaginary part or conjugate (``abs``, ``.real``, ``.imag``, ``.conjugate()``, ``phase``).

The operands may be complex duals, real duals (:class:`~dualgpu.compiled.types.DualType`),
real and complex numbers, as long as one is a complex dual or a real dual meets a complex
number. The answer is a complex dual, or a real dual for the real-linear rules whose answer
is real. Hand-written, each saying why: ``complex(a, b)``, ``cmath.rect`` and
``cmath.polar`` (compositions of table rules), ``isfinite``/``isnan``/``isinf`` (of the
value), ``==``/``!=`` (of the values) and the ordering comparisons (refused, with the fix).
"""
import ast
import builtins
import cmath
import math
import operator
import re

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.core.extending import overload, register_jitable
from numba.core.target_extension import current_target

from dualgpu import complex_rules, nansafe, rules
from dualgpu.compiled.complex_duals import make_complex_dual
from dualgpu.compiled.types import ComplexDualType, DualType, TaggedDualType, make_dual
from dualgpu.core._expressions import expression
from dualgpu.errors import UnsupportedFeatureError

__all__ = ["complex_kind", "complex_targets", "complex_rule_impl"]


def complex_kind(ty):
    """``"c"`` complex dual, ``"r"`` real dual, ``"kc"`` complex number, ``"k"`` real number;
    None for anything else (a tracer, a tagged dual, an array)."""
    if isinstance(ty, ComplexDualType):
        return "c"
    if isinstance(ty, DualType):
        return None if ty.tracer else "r"
    if isinstance(ty, types.Complex):
        return "kc"
    if isinstance(ty, (types.Float, types.Integer, types.Boolean)):
        return "k"
    return None


def _numpy_dtype(ty):
    if isinstance(ty, (DualType, ComplexDualType)):
        ty = ty.dtype
    return np.dtype("int64") if isinstance(ty, types.Boolean) else np.dtype(str(ty))


def _work_dtype(arg_types):
    """The complex dtype the rule runs in: numpy's promotion of the values, made complex."""
    result = np.result_type(np.complex64, *[_numpy_dtype(t) for t in arg_types])
    return types.complex64 if result == np.complex64 else types.complex128


@register_jitable
def _real_part(z):
    return z.real


@register_jitable
def _imag_part(z):
    return z.imag


@register_jitable
def _conjugate(z):
    return z.conjugate()


@register_jitable
def _over_zero(x):
    """``x / 0.0`` as numpy gives it (inf with x's sign, NaN for 0 and NaN), never raising."""
    if x != x or x == 0:
        return math.nan
    return math.inf if x > 0 else -math.inf


@register_jitable
def _quiet_divide(a, b):
    """``a / b`` of complex numbers that never raises: numba's complex division raises
    ZeroDivisionError at ``b == 0`` whatever the error model; a derivative factor gives
    infinities there, as in a kernel (and as numpy gives them)."""
    if b.real == 0 and b.imag == 0:
        return complex(_over_zero(a.real), _over_zero(a.imag))
    return a / b


@register_jitable
def _quiet_power(a, b):
    """``a ** b`` of complex numbers that never raises (numba, as CPython, raises for 0 to a
    negative or complex power): infinite there."""
    if a.real == 0 and a.imag == 0 and (b.real < 0 or b.imag != 0):
        return complex(math.inf, math.nan)
    return a ** b


#: what the names of the derivative expressions call on complex numbers
_FUNCTIONS = {"exp": cmath.exp, "log": cmath.log, "sqrt": cmath.sqrt, "sin": cmath.sin,
              "cos": cmath.cos, "sinh": cmath.sinh, "cosh": cmath.cosh, "pow": _quiet_power,
              "_quiet_divide": _quiet_divide}


class _QuietDivisions(ast.NodeTransformer):
    """``a / b`` -> ``_quiet_divide(a, b)`` in a derivative expression."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Div):
            return ast.Call(ast.Name("_quiet_divide", ast.Load()), [node.left, node.right], [])
        if isinstance(node.op, ast.Pow):
            return ast.Call(ast.Name("pow", ast.Load()), [node.left, node.right], [])
        return node


def _quiet(source):
    """``source`` with its divisions and powers made non-raising (see :func:`_quiet_divide`)."""
    tree = _QuietDivisions().visit(ast.parse(source, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree))
#: the primal of the real-linear rules without a plain callable in compiled code
_PRIMALS = {"real": _real_part, "imag": _imag_part, "conj": _conjugate}
#: rules whose primal takes complex values (a real dual's value is made complex first)
_COMPLEX_ONLY_PRIMAL = {key for key, rule in complex_rules.COMPLEX_RULES.items()
                        if rule.primal.startswith("cmath.")} | set(_PRIMALS)
_TANGENT_SOURCE = {"holomorphic": "{}", "real": "({}).real", "imag": "({}).imag",
                   "conj": "({}).conjugate()"}


def _refuse_unsupported(key, args, complex_function=False):
    """A complex operand with a tagged (second-order) dual: refused by name (complex duals are
    first order; numba would list its candidates). Structural tracers meeting complex numbers
    are refused by :mod:`dualgpu.compiled.rules`."""
    kinds = [complex_kind(a) for a in args]
    if not ("c" in kinds or "kc" in kinds or complex_function):
        return
    if any(isinstance(a, TaggedDualType) for a in args):
        raise UnsupportedFeatureError(
            f"{key}({', '.join(map(str, args))}): complex numbers meet a second-order (tagged "
            "or nested) dual; complex duals are first order only, on every backend. Fix: "
            "differentiate the real and imaginary parts as real duals, or take this "
            "derivative by first-order forward mode (jacobian, jvp).")


def _accepts(key, kinds):
    """True when a call of the complex rule ``key`` with operands of ``kinds`` is ours."""
    if None in kinds:
        return False
    if "c" in kinds:
        return True
    if "r" not in kinds:
        return False
    # a real dual with a complex number, or a cmath function of a real dual
    return "kc" in kinds or (len(kinds) == 1 and key in _COMPLEX_ONLY_PRIMAL
                             and key not in _PRIMALS)


_IMPLS = {}


def complex_rule_impl(key, arg_types, primal=None):
    """The implementation (a Python function numba compiles) of the complex rule ``key`` on
    operands of ``arg_types``; ``primal``: the function the user called (default: the rule's).
    """
    kinds = tuple(complex_kind(t) for t in arg_types)
    lanes = {t.n for t in arg_types if isinstance(t, (DualType, ComplexDualType))}
    if len(lanes) != 1:
        raise TypingError(f"{key}{tuple(str(t) for t in arg_types)}: duals with different lane "
                          f"counts {sorted(lanes)} cannot be combined; seed every dual input of "
                          "one computation with the same N.")
    n = lanes.pop()
    work = _work_dtype(arg_types)
    rule = complex_rules.COMPLEX_RULES[key]
    real_answer = all(t in ("real", "imag") for t in rule.tangents)
    out = (types.float32 if work == types.complex64 else types.float64) if real_answer else work
    if primal is None:
        primal = _PRIMALS.get(key) or _resolve(rule.primal)
    cache_key = (key, tuple(arg_types), primal)
    found = _IMPLS.get(cache_key)
    if found is not None:
        return found
    if key in rules.UNARY_RULES or key in rules.BINARY_RULES:
        rules.note_compiled(key)  # compiled code keeps this rule (see rules.define)
    params = ["a", "b"][:len(arg_types)]  # the typers' parameter names
    lines = [f"def impl({', '.join(params)}):"]
    for i, kind in enumerate(kinds):
        dual = kind in ("c", "r")
        lines.append(f"    v{i} = {params[i]}.value" if dual else f"    v{i} = {params[i]}")
        if dual:
            lines.append(f"    p{i} = {params[i]}.partials")
    values = [f"v{i}" for i in range(len(kinds))]
    if key in _COMPLEX_ONLY_PRIMAL:
        values = [f"_C(v{i})" for i in range(len(kinds))]
    lines.append(f"    raw = _primal({', '.join(values)})")
    names = ("x", "y")
    for i in range(len(kinds)):
        lines.append(f"    {names[i]} = _C(v{i})")
    lines.append("    ans = _C(raw)")
    ns = {"_primal": primal, "_C": _numba_class(work), "_O": _numba_class(out),
          "_make": make_complex_dual if out is work else make_dual, **_FUNCTIONS}
    terms = []  # per dual operand: (source of the lane k term with {k}, gate variable or None)
    for i, kind in enumerate(kinds):
        if kind in ("c", "r"):
            term = _operand_term(rule, i, kind, lines)
            if term is not None:
                terms.append(term)
    lane_sources = []
    for k in range(n):
        parts = [(t.replace("{k}", str(k)), g) for t, g in terms]
        summed = " + ".join(f"({t} if {g} else _O(0))" if g else f"_O({t})" for t, g in parts)
        lane_sources.append(f"_O({summed or '0'})")
    lines.append(f"    return _make(_O(raw), ({', '.join(lane_sources)},))")
    exec(compile("\n".join(lines) + "\n", f"<dualgpu complex {key}>", "exec"), ns)
    _IMPLS[cache_key] = ns["impl"]
    return ns["impl"]


def _operand_term(rule, i, kind, lines):
    """The lane term of dual operand ``i`` of ``rule`` (its factor's lines added to ``lines``):
    ``(source with {k} for the lane, gate variable or None)``, or None for a zero factor."""
    expr = expression(rule.derivatives[i])
    for name, value in expr.constants.items():
        lines.append(f"    {name}_{i} = _C({float(value)!r})")

    def local(source):  # the expression's constants, named apart from the other operand's
        return re.sub(r"\b(_c\d+)\b", rf"\1_{i}", source) if expr.constants else source

    gate = None
    unit, source = expr.unit, expr.source
    if expr.gate is not None:
        gate = f"g{i}"
        lines.append(f"    {gate} = {'' if expr.gate.when else 'not '}({local(expr.gate.test)})")
        unit, source = expr.gate.unit, expr.gate.source
    if unit == 0:
        return None
    lane = f"_C(p{i}[{{k}}])" if kind == "r" else f"p{i}[{{k}}]"
    if unit == 1:
        product = lane
    elif unit == -1:
        product = f"-{lane}"
    else:
        factor = _quiet(local(source))
        if gate is None:
            lines.append(f"    f{i} = _C({factor})")
        else:
            lines.append(f"    f{i} = _C({factor}) if {gate} else _C(0)")
        product = f"f{i} * {lane}"
        if nansafe.NANSAFE_MODE_ENABLED:  # a zero partial stays zero (dualgpu.nansafe)
            product = f"(_C(0) if {lane} == 0 else {product})"
    return _TANGENT_SOURCE[rule.tangents[i]].format(product), gate


def _numba_class(ty):
    return {types.complex64: np.complex64, types.complex128: np.complex128,
            types.float32: np.float32, types.float64: np.float64}[ty]


def _resolve(dotted):
    module, _, name = dotted.rpartition(".")
    return getattr({"cmath": cmath, "operator": operator, "builtins": builtins,
                    "numpy": np}[module], name)


def complex_targets():
    """``(function, rule key)`` for every function compiled code applies a complex rule to:
    the operators (and in-place ones), ``abs`` and the ``cmath`` functions of the table."""
    for key, rule in complex_rules.COMPLEX_RULES.items():
        if rule.primal.startswith(("operator.", "cmath.", "builtins.")):
            yield _resolve(rule.primal), key
    for dotted, key in rules.INPLACE.items():
        if key in complex_rules.COMPLEX_RULES:
            yield _resolve(dotted), key


def _register(fn, key):
    nargs = len(complex_rules.COMPLEX_RULES[key].derivatives)

    def typer(*args):
        if len(args) != nargs:
            return None
        _refuse_unsupported(key, args, getattr(fn, "__module__", None) == "cmath")
        if not _accepts(key, tuple(complex_kind(a) for a in args)):
            return None
        return complex_rule_impl(key, args)

    if nargs == 1:
        overload(fn)(lambda a: typer(a))
    else:
        overload(fn)(lambda a, b: typer(a, b))


for _fn, _key in complex_targets():
    _register(_fn, _key)


# --- numpy functions on complex duals (np.exp(z), np.abs(z), np.conj(z), np.angle(z)...) --

def _target_primal(function, key):
    """What computes the value of the numpy ``function`` on this target: the ufunc itself
    where the target lowers it (the CPU; numba.cuda lowers only some); else the rule's own
    primal (``cmath.exp`` for ``np.exp``); None where neither compiles for CUDA."""
    rule = complex_rules.COMPLEX_RULES[key]
    if key in _PRIMALS:
        return _PRIMALS[key]
    if not isinstance(function, np.ufunc):  # np.angle: the rule's primal (cmath.phase)
        return _resolve(rule.primal)
    if current_target() != "cuda":
        return function
    from numba.cuda.ufuncs import ufunc_db

    if function in ufunc_db():
        return function
    return None if rule.primal.startswith("numpy.") else _resolve(rule.primal)


def _register_numpy(name, key):
    function = getattr(np, name)
    nargs = len(complex_rules.COMPLEX_RULES[key].derivatives)

    def typer(*args):
        if len(args) != nargs or not _accepts(key, tuple(complex_kind(a) for a in args)):
            return None
        primal = _target_primal(function, key)
        if primal is None:
            raise TypingError(
                f"numpy.{name} of a complex dual: numba.cuda has no complex numpy.{name} (plain "
                f"code would not compile either). Fix: write it with cmath and arithmetic "
                f"(np.expm1(z) as cmath.exp(z) - 1, np.square(z) as z * z...).")
        return complex_rule_impl(key, args, primal)

    if nargs == 1:
        overload(function)(lambda a: typer(a))
    else:
        overload(function)(lambda a, b: typer(a, b))


for _name, _key in complex_rules.COMPLEX_NUMPY.items():
    _register_numpy(_name, _key)
