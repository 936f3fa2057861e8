"""Dual operations lowered straight into the function being compiled (CPU and CUDA alike).

A rule of the table applied to duals is a typing template whose lowering emits the primal,
the derivative factors and the lane arithmetic as LLVM IR in the caller
(:func:`register_lowered`, :func:`rule_codegen`). Generating Python source for each rule and
compiling it as an ``@overload`` ran numba's whole pipeline once per rule, argument kinds,
dtype and lane count (40-60 ms each; a 32-lane N-body kernel spent 0.75 s there). Emitting the
IR costs about a millisecond, and the result is the same code:

* the primal is the function the user called, lowered by numba as in plain code, so a dual's
  value is bit-identical to the plain value;
* each derivative factor is the rule's expression (:mod:`dualgpu.core._expressions`) on the
  values converted to the result dtype, its literals constants of that dtype, each operation
  lowered by numba's own implementation;
* the lanes are ``factor * partial`` (one multiplication per lane, none for a unit factor,
  a NaN-safe product in NaN-safe mode), and a gated term ``A if test else 0`` is a branch: an
  inactive term contributes nothing at all.

Everything is computed with numpy's error model (a derivative factor never raises: ``sqrt(0)``
gives an infinite factor, as in a kernel). Where plain code compiled with Python's error model
raises (``x / 0.0``, :data:`dualgpu.rules.ZERO_DIVISION_ERRORS`), the caller's error model
raises the same ``ZeroDivisionError`` first.
"""
import ast
import functools
import inspect
import operator
import sys

from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.typing.templates import (
    fold_arguments, infer, infer_global)

from dualgpu.compiled.intrinsics import intrinsic_template
from dualgpu.compiled.types import (
    DualArrayType,
    DualType,
    TaggedDualType,
    build_dual,
    cast_lane_values,
    dual_type,
    lane_flags,
    lane_values,
    nansafe_product,
    pack_lanes,
    plain_product,
)
from dualgpu.core._expressions import expression

__all__ = ["register_lowered", "lower_call", "value_of", "value_and_partials", "quiet", "RuleSpec",
           "rule_codegen", "Emitter", "TypeWalk", "DUAL_TYPES"]


def register_lowered(fn, definition, name):
    """Type calls of ``fn`` with ``definition(typingctx, *arg_types)``, lowered by the codegen
    it returns; calls without a dual or a DualArray among their arguments are not offered.

    ``definition`` returns None (not this template's call: numba tries the next) or
    ``(signature, codegen)`` as an ``@intrinsic`` does; ``codegen(context, builder, sig, args)``
    emits the call's IR in the caller. Registered for the generic target: ``@njit`` and
    ``@cuda.jit`` see it.
    """
    arity = len(inspect.signature(definition).parameters) - 1
    base = intrinsic_template(fn, definition, name)  # its codegens kept per typing context
    # numba offers each template every call of fn; one of another arity is not this one's
    template = type(base)(name, (base,), {"_arity": arity, "generic": _generic_of_arity})
    infer(template)
    infer_global(fn, types.Function(template))


def _generic_of_arity(self, args, kws):
    # every `i + 1` of every kernel asks this template: answer at once where no dual is
    if kws or len(args) != self._arity or not any(isinstance(a, DUAL_TYPES) for a in args):
        return None
    return super(type(self), self).generic(args, kws)


#: the types whose calls the lowered templates answer (first-order and tagged duals, DualArrays)
DUAL_TYPES = (DualType, DualArrayType, TaggedDualType)


def lower_call(context, builder, fn, arg_types, args):
    """Emit ``fn(*args)`` as numba lowers that call in plain code; return ``(value, type)``.

    The arguments are converted to the types of the signature numba resolves (as a call in
    plain code converts them). The call is typed here, in the caller's typing context, every
    time: a function type remembers the implementation of the target that typed it last.
    """
    typing = context.typing_context
    fnty = typing.resolve_value_type(fn)
    sig = typing.resolve_function_type(fnty, tuple(arg_types), {})
    if sig is None:
        raise TypingError(f"dualgpu: no implementation of {fn} for {tuple(arg_types)}")
    if sig.pysig is None:
        values = [context.cast(builder, v, t, f) for v, t, f in zip(args, arg_types, sig.args)]
    else:  # as numba's Lower.fold_call_args: min(*args) takes one tuple of its arguments
        def normal(index, param, var):
            return context.cast(builder, var[0], var[1], sig.args[index])

        def default(index, param, value):
            return context.get_constant_generic(builder, sig.args[index], value)

        def stararg(index, param, items):
            return cgutils.make_anonymous_struct(builder, [
                context.cast(builder, v, t, f) for (v, t), f in zip(items, sig.args[index])])

        values = fold_arguments(sig.pysig, list(zip(args, arg_types)), {}, normal, default,
                                stararg)
    return context.get_function(fnty, sig)(builder, values), sig.return_type


def value_and_partials(context, builder, ty, arg):
    """``(value, partials)`` of ``arg`` (of type ``ty``): a dual's (first order or tagged), or
    the number itself and None."""
    if isinstance(ty, (DualType, TaggedDualType)):
        dual = cgutils.create_struct_proxy(ty)(context, builder, value=arg)
        return dual.value, dual.partials
    return arg, None


def value_of(context, builder, ty, arg):
    """The value of ``arg`` (of type ``ty``): a dual's value, or the number itself."""
    return value_and_partials(context, builder, ty, arg)[0]


def quiet(context):
    """``context`` with numpy's error model (a float division by zero gives inf, no raise)."""
    model = context.error_model
    if not getattr(model, "raise_on_fp_zero_division", False):
        return context
    models = sys.modules[type(model).__module__].error_models  # the target's own callconv
    return context.subtarget(error_model=models["numpy"](context.call_conv))


# --- derivative expressions -------------------------------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


@functools.lru_cache(maxsize=None)
def _parsed(source):
    return ast.parse(source, mode="eval").body


class Emitter:
    """Emits derivative expressions on the names ``x``, ``y``, ``ans``.

    ``names`` maps each to ``(value, numba type)``; literals are constants of ``dtype``;
    ``functions`` says what each function name of the table calls. Each operation is lowered
    by numba as in plain code (:func:`lower_call`), so on nested duals an operation of inner
    duals is the inner rule. :class:`TypeWalk` walks the same expression for its types alone.
    """

    def __init__(self, context, builder, dtype, names, functions):
        self.context, self.builder, self.dtype = context, builder, dtype
        self.names, self.functions = names, functions

    def factor(self, source, constants):
        """The expression ``source`` (literals named in ``constants``) as a ``dtype`` value."""
        value, ty = self.emit(_parsed(source), constants)
        return self.context.cast(self.builder, value, ty, self.dtype)

    def value(self, source, constants):
        """The expression ``source`` as ``(value, type)``, in the type numba gives it."""
        return self.emit(_parsed(source), constants)

    def test(self, source, constants):
        """The expression ``source`` as an i1."""
        return self._truth(_parsed(source), constants)

    # primitives (TypeWalk replaces them)
    def call(self, fn, arg_types, args):
        return lower_call(self.context, self.builder, fn, arg_types, args)

    def constant(self, value):
        return self.context.get_constant(self.dtype, value), self.dtype

    def select(self, test, a, b):
        (a, at), (b, bt) = a, b
        ty = self.context.typing_context.unify_types(at, bt) or self.dtype
        a = self.context.cast(self.builder, a, at, ty)
        b = self.context.cast(self.builder, b, bt, ty)
        return self.builder.select(test, a, b), ty

    def truth(self, value, ty):
        return self.context.is_true(self.builder, ty, value)

    def join(self, is_and, bits):
        return functools.reduce(self.builder.and_ if is_and else self.builder.or_, bits)

    def negate(self, bit):
        return self.builder.not_(bit)

    def emit(self, node, constants):
        if isinstance(node, ast.Name):
            if node.id in constants:
                return self.constant(constants[node.id])
            return self.names[node.id]
        if isinstance(node, ast.Constant):
            return self.constant(float(node.value))
        if isinstance(node, ast.BinOp):
            (a, at), (b, bt) = self.emit(node.left, constants), self.emit(node.right, constants)
            return self.call(_BINARY[type(node.op)], (at, bt), (a, b))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return self.negate(self._truth(node.operand, constants)), types.boolean
            a, at = self.emit(node.operand, constants)
            return self.call(_UNARY[type(node.op)], (at,), (a,))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            (a, at), (b, bt) = (self.emit(node.left, constants),
                                self.emit(node.comparators[0], constants))
            return self.call(_COMPARE[type(node.ops[0])], (at, bt), (a, b))
        if isinstance(node, ast.BoolOp):
            bits = [self._truth(v, constants) for v in node.values]
            return self.join(isinstance(node.op, ast.And), bits), types.boolean
        if isinstance(node, ast.IfExp):
            test = self._truth(node.test, constants)
            return self.select(test, self.emit(node.body, constants),
                               self.emit(node.orelse, constants))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            emitted = [self.emit(a, constants) for a in node.args]
            return self.call(self.functions[node.func.id], [t for _, t in emitted],
                             [v for v, _ in emitted])
        raise NotImplementedError(f"dualgpu: cannot lower {ast.unparse(node)!r} "
                                  "in a derivative expression")

    def _truth(self, node, constants):
        return self.truth(*self.emit(node, constants))


class TypeWalk(Emitter):
    """Walks expressions as :class:`Emitter` does, for the types alone (when a call is typed).

    ``names`` maps each name to ``(None, numba type)``.
    """

    def __init__(self, typingctx, dtype, names, functions):
        super().__init__(None, None, dtype, names, functions)
        self.typingctx = typingctx

    def call(self, fn, arg_types, args):
        sig = self.typingctx.resolve_function_type(self.typingctx.resolve_value_type(fn),
                                                   tuple(arg_types), {})
        if sig is None:
            raise TypingError(f"dualgpu: no implementation of {fn} for {tuple(arg_types)}")
        return None, sig.return_type

    def constant(self, value):
        return None, self.dtype

    def select(self, test, a, b):
        return None, self.typingctx.unify_types(a[1], b[1]) or self.dtype

    def truth(self, value, ty):
        return None

    def join(self, is_and, bits):
        return None

    def negate(self, bit):
        return None


# --- one rule on one mix of argument types -------------------------------------------------

class RuleSpec:
    """What the lowering of one rule call needs, fixed when the call is typed.

    Attributes
    ----------
    rule : dualgpu.rules.Rule
    arg_types : tuple of numba types
        Duals and numbers.
    dtype : numba float type
        The result's value dtype.
    primal : callable
        Computes the value (numba lowers it as in plain code).
    quiet_primal : callable or None
        Computes the value where no ZeroDivisionError is raised, if it differs from ``primal``.
    zero_division : tuple or None
        ``(condition, message)`` of :data:`dualgpu.rules.ZERO_DIVISION_ERRORS` raised where the
        caller compiles with Python's error model.
    nansafe : bool
        Lane products keep a zero partial zero.
    functions : dict
        What the names of the derivative expressions call.
    result : DualType
    """

    __slots__ = ("rule", "arg_types", "dtype", "primal", "quiet_primal", "zero_division",
                 "nansafe", "functions", "result")

    def __init__(self, rule, arg_types, dtype, primal, quiet_primal, zero_division, nansafe,
                 functions):
        self.rule, self.arg_types, self.dtype = rule, tuple(arg_types), dtype
        self.primal, self.quiet_primal, self.zero_division = primal, quiet_primal, zero_division
        self.nansafe, self.functions = nansafe, functions
        duals = [t for t in self.arg_types if isinstance(t, DualType)]
        self.result = dual_type(dtype, duals[0].n, tracer=duals[0].tracer, mode=duals[0].mode)


class _Term:
    """One dual argument's contribution: ``factor * partials``, possibly behind a gate."""

    __slots__ = ("k", "unit", "source", "constants", "lanes", "gate")

    def __init__(self, k, unit, source, constants, lanes, gate=None):
        self.k, self.unit, self.source, self.constants = k, unit, source, constants
        self.lanes, self.gate = lanes, gate


def rule_codegen(spec):
    """The codegen of the call that ``spec`` describes (see the module docstring)."""

    def codegen(context, builder, sig, args):
        values, partials = zip(*(value_and_partials(context, builder, t, a)
                                 for t, a in zip(spec.arg_types, args)))
        value_types = [t.dtype if isinstance(t, DualType) else t for t in spec.arg_types]
        if spec.zero_division is not None and context.error_model.raise_on_fp_zero_division:
            _raise_zero_division(context, builder, spec.zero_division, values, value_types)
            primal = spec.primal
        else:
            primal = spec.quiet_primal or spec.primal
        silent = quiet(context)
        ans, ans_type = lower_call(silent, builder, primal, value_types, values)
        ans = context.cast(builder, ans, ans_type, spec.dtype)
        if spec.result.tracer:
            lanes = _tracer_lanes(context, builder, spec, partials)
        else:
            lanes = _tangent_lanes(silent, builder, spec, values, value_types, ans, partials)
        return build_dual(context, builder, spec.result, ans, lanes)

    return codegen


def _raise_zero_division(context, builder, zero_division, values, value_types):
    condition, message = zero_division

    def compare(op, k, constant):
        bound = context.get_constant(value_types[k], constant)
        result, ty = lower_call(context, builder, op, (value_types[k],) * 2, (values[k], bound))
        return context.is_true(builder, ty, result)

    if condition == "zero divisor":
        test = compare(operator.eq, 1, 0)
    else:  # "zero to a negative int"
        test = builder.and_(compare(operator.lt, 1, 0), compare(operator.eq, 0, 0))
    with cgutils.if_unlikely(builder, test):
        context.error_model.fp_zero_division(builder, (message,))


def _tracer_lanes(context, builder, spec, partials):
    """A structural tracer's lanes: the union of the dependencies whose factor is not 0."""
    kinds = spec.arg_types
    # a global tracer's lanes are what the *value* depends on: a step function (floor,
    # `//`, sign: derivative 0) keeps its argument's sets, so an index made from it later is
    # refused (dualgpu.core.traced_branch) instead of passing as a constant
    keep_all = spec.result.tracer == "global"
    deps = [k for k, t in enumerate(kinds) if isinstance(t, DualType)
            and (keep_all or expression(spec.rule.derivatives[k]).unit != 0)]
    out_type = spec.result.partials_type
    if not deps:
        zero = context.get_constant(spec.result.lane_dtype, 0)
        return pack_lanes(context, builder, out_type, [zero] * spec.result.n)
    lanes = [lane_values(builder, partials[k], spec.result.n) for k in deps]
    if len(lanes) == 1:
        return partials[deps[0]]
    return pack_lanes(context, builder, out_type, [builder.or_(p, q) for p, q in zip(*lanes)])


def _tangent_lanes(context, builder, spec, values, value_types, ans, partials):
    """The partials of the result: ``sum_k factor_k * partials_k`` (``context`` is quiet)."""
    dtype = spec.dtype
    names = {"ans": (ans, dtype)}
    for name, value, ty in zip(("x", "y"), values, value_types):
        names[name] = (context.cast(builder, value, ty, dtype), dtype)
    emitter = Emitter(context, builder, dtype, names, spec.functions)
    terms, factors = [], {}
    for k, ty in enumerate(spec.arg_types):
        if not isinstance(ty, DualType):
            continue
        expr = expression(spec.rule.derivatives[k])
        if expr.unit == 0:
            continue
        lanes = (partials[k], ty.partials_type)
        if expr.gate is not None:
            gate = expr.gate
            test = emitter.test(gate.test, expr.constants)
            active = test if gate.when else builder.not_(test)
            if gate.unit != 0:
                terms.append(_Term(k, gate.unit, gate.source, expr.constants, lanes, active))
            continue
        if expr.unit is None:
            factors[k] = emitter.factor(expr.source, expr.constants)
        terms.append(_Term(k, expr.unit, expr.source, expr.constants, lanes))
    product = nansafe_product if spec.nansafe else plain_product
    out_type = spec.result.partials_type
    slot_type = context.get_value_type(out_type)

    def combine(active, gated, factors):
        if gated:  # one branch per gate: the inactive term is left out, not multiplied by 0
            gate, rest = gated[0], gated[1:]
            slot = cgutils.alloca_once(builder, slot_type)
            with builder.if_else(gate.gate) as (then, otherwise):
                with then:
                    builder.store(combine(active, rest, dict(factors)), slot)
                with otherwise:
                    builder.store(combine([t for t in active if t is not gate], rest,
                                          dict(factors)), slot)
            return builder.load(slot)
        for t in active:  # a gated factor is computed only where it is active
            if t.gate is not None and t.unit is None:
                factors[t.k] = emitter.factor(t.source, t.constants)
        lanes = _combine(context, builder, dtype, active, factors, product, spec)
        return pack_lanes(context, builder, out_type, lanes)

    return combine(terms, [t for t in terms if t.gate is not None], factors)


def _combine(context, builder, dtype, terms, factors, product, spec):
    """The lanes of up to two active terms (units cost no multiplication)."""
    flags = lane_flags(context)

    def cast(term):
        return cast_lane_values(context, builder, term.lanes[0], term.lanes[1], dtype)

    if not terms:
        return [context.get_constant(dtype, 0.0)] * spec.result.n
    if len(terms) == 1:
        t = terms[0]
        if t.unit == 1:
            return cast(t)
        if t.unit == -1:  # fsub from -0.0 rather than fneg: NVVM's IR dialect predates fneg
            minus_zero = context.get_constant(dtype, -0.0)
            return [builder.fsub(minus_zero, x) for x in cast(t)]
        return [product(context, builder, factors[t.k], x, dtype) for x in cast(t)]
    a, b = terms
    if (a.unit, b.unit) == (1, 1):
        return [builder.fadd(x, y, flags=flags) for x, y in zip(cast(a), cast(b))]
    if (a.unit, b.unit) == (1, -1):
        return [builder.fsub(x, y, flags=flags) for x, y in zip(cast(a), cast(b))]

    def factor(t):
        return context.get_constant(dtype, float(t.unit)) if t.unit in (1, -1) else factors[t.k]

    fa, fb = factor(a), factor(b)
    return [builder.fadd(product(context, builder, fa, x, dtype),
                         product(context, builder, fb, y, dtype), flags=flags)
            for x, y in zip(cast(a), cast(b))]
