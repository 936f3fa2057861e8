"""numba typing and lowering of tagged and nested duals (second order), CPU and CUDA alike.

``TaggedDualType(value_type, n, tag)`` is a dual of tag 1 or more (tag 0 is the
first-order :class:`~dualgpu.compiled.types.DualType`): a struct of a value and a
``UniTuple(value_type, n)`` of partials, where ``value_type`` is a float (a
first-order dual of that tag) or a dual of a lower tag (a nested dual: a dual
of duals). ``TaggedDualArrayType`` is the matching DualArray: its ``values``
and lane-major ``partials`` are float arrays or DualArrays of a lower tag.

The rules are lowered inline from the same rule table as first order
(:mod:`dualgpu.rules`, through :mod:`dualgpu.compiled.lowering`), with ordinary
operators instead of lane arithmetic, so that on nested duals each operation is
the first-order rule:

* the primal is the rule's primal applied to the values;
* each derivative factor is the rule's expression evaluated on the values
  (``cos(x)`` of an inner dual is the inner cos rule);
* each lane is ``factor * partial`` (+ the other argument's term), with
  ordinary dual arithmetic.

Tags keep perturbations apart: among the arguments the duals of the highest
tag are differentiated and everything else (numbers, duals of lower tags) is
a constant of them, carried in the value (see :func:`dualgpu.hessian`). The
first-order generators in :mod:`dualgpu.compiled.rules` never see these types.
"""
import math
import operator

from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import lower_cast, overload

from dualgpu import rules
from dualgpu.compiled.attributes import array_attributes, lanes_attribute
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.compiled.lowering import (
    Emitter, TypeWalk, lower_call, quiet, register_lowered, value_and_partials,
)
from dualgpu.compiled.rules import (
    _round_ndigits_typer, digamma, register_divmod, register_variadic, resolve_primal,
    result_dtype, rule_targets,
)
from dualgpu.compiled.types import (
    DualArrayType, DualType, TaggedDualArrayType, TaggedDualType, combine, float_floor,
    float_rint, float_trunc, innermost, level, same_bits, tagged_array_type, tagged_type,
)
from dualgpu.core._expressions import expression
from dualgpu.errors import missing_rule_message

# the types are dualgpu.compiled.types'; tagged_type and tagged_array_type are re-exported
# here, next to the overloads, as their users know them
__all__ = ["maker", "array_maker", "tagged_type", "tagged_array_type"]


lanes_attribute(TaggedDualType)


def _build(context, builder, ty, value, lanes):
    d = cgutils.create_struct_proxy(ty)(context, builder)
    d.value = value
    d.partials = context.make_tuple(builder, ty.partials_type, lanes)
    return d._getvalue()


def _combine_all(tys):
    result = tys[0]
    for ty in tys[1:]:
        result = combine(result, ty)
        if result is None:
            return None
    return result


def _holding(tag, value, lanes, what):
    """The dual of ``tag`` whose value type holds ``value`` and every type in ``lanes`` (their
    common type), or a TypingError naming ``what``."""
    value_type = _combine_all([value] + list(lanes))
    if value_type is None or (level(value_type) or 0) >= tag:
        raise TypingError(f"a dual of tag {tag} cannot hold {what}: a value of a higher tag "
                          "would lose its partials.")
    return tagged_type(value_type, len(lanes), tag)


def _build_cast(context, builder, ret, value, lanes):
    """The dual of type ``ret`` from ``(llvm value, type)`` pairs, cast to its value type."""
    value_type = ret.value_type
    return _build(context, builder, ret, context.cast(builder, *value, value_type),
                  [context.cast(builder, *lane, value_type) for lane in lanes])


_MAKERS = {}


def maker(tag):
    """An intrinsic ``make(value, lanes)`` building a dual of ``tag``; value and lanes are cast
    to their common type (a float lane next to a dual value becomes a constant dual)."""
    if tag in _MAKERS:
        return _MAKERS[tag]

    def make(typingctx, value, lanes):
        if not isinstance(lanes, types.BaseTuple) or len(lanes) == 0:
            raise TypingError(f"make tagged dual: lanes must be a non-empty tuple; got {lanes}")
        ret = _holding(tag, value, lanes.types, f"{value} and {lanes}")

        def codegen(context, builder, sig, args):
            items = [(builder.extract_value(args[1], k), t) for k, t in enumerate(lanes.types)]
            return _build_cast(context, builder, ret, (args[0], value), items)

        return ret(value, lanes), codegen

    make.__name__ = f"make_dual_tag{tag}"
    _MAKERS[tag] = intrinsic(make)
    return _MAKERS[tag]


# --- casts --------------------------------------------------------------------------------

def _constant_of(context, builder, fromty, toty, val):
    """``val`` (a number or a lower-tag dual) as a dual of ``toty``'s tag with zero lanes."""
    value = context.cast(builder, val, fromty, toty.value_type)
    zero = context.cast(builder, context.get_constant(toty.dtype, 0), toty.dtype,
                        toty.value_type)
    return _build(context, builder, toty, value, [zero] * toty.n)


@lower_cast(types.Float, TaggedDualType)
@lower_cast(types.Integer, TaggedDualType)
@lower_cast(types.Boolean, TaggedDualType)
@lower_cast(DualType, TaggedDualType)
def _to_tagged(context, builder, fromty, toty, val):
    return _constant_of(context, builder, fromty, toty, val)


@lower_cast(TaggedDualType, TaggedDualType)
def _tagged_to_tagged(context, builder, fromty, toty, val):
    if fromty.tag < toty.tag:
        return _constant_of(context, builder, fromty, toty, val)
    if fromty.tag != toty.tag or fromty.n != toty.n:
        raise TypingError(f"cannot convert {fromty} to {toty}")
    src = cgutils.create_struct_proxy(fromty)(context, builder, value=val)
    value = context.cast(builder, src.value, fromty.value_type, toty.value_type)
    lanes = [context.cast(builder, builder.extract_value(src.partials, k), fromty.value_type,
                          toty.value_type) for k in range(fromty.n)]
    return _build(context, builder, toty, value, lanes)


# --- rules of the table, lowered inline --------------------------------------------------------

def _innermost_ir(context, builder, ty, value):
    """The innermost float of ``value`` (a number, or a dual of duals) and its type."""
    while isinstance(ty, (DualType, TaggedDualType)):
        value = cgutils.create_struct_proxy(ty)(context, builder, value=value).value
        ty = ty.dtype if isinstance(ty, DualType) else ty.value_type
    return value, ty


def _of_innermost(name, fn, as_float64=False):
    """An intrinsic ``name(*args)``: ``fn`` of the arguments' innermost values (as float64
    with ``as_float64``: two values may differ in precision, max of a float32 dual and a
    float64, and float64 holds every float32 exactly)."""
    def typer(typingctx, *args):
        inner = tuple(types.float64 if as_float64 else innermost(a) for a in args)
        sig = typingctx.resolve_function_type(typingctx.resolve_value_type(fn), inner, {})

        def codegen(context, builder, signature, values):
            found = [_innermost_ir(context, builder, a, v) for a, v in zip(args, values)]
            return lower_call(context, builder, fn, inner, [
                context.cast(builder, v, t, f) for (v, t), f in zip(found, inner)])[0]

        return sig.return_type(*args), codegen

    if name == "same":
        definition = lambda typingctx, a, b: typer(typingctx, a, b)  # noqa: E731
    else:
        definition = lambda typingctx, x: typer(typingctx, x)  # noqa: E731
    definition.__name__ = f"{name}_of_innermost"
    return intrinsic(definition)


#: the rule expressions' functions on nested duals: the value-only ones (floor, trunc,
#: same) read the innermost values; the others are math's, whose dual overloads apply, and
#: dualgpu's digamma, compiled on the duals
_VALUE_FUNCTIONS = {"floor": _of_innermost("floor", float_floor),
                    "trunc": _of_innermost("trunc", float_trunc),
                    "rint": _of_innermost("rint", float_rint),
                    "same": _of_innermost("same", same_bits, as_float64=True)}
_OWN_FUNCTIONS = {**_VALUE_FUNCTIONS, "digamma": digamma}
_NAMESPACE = {name: _OWN_FUNCTIONS.get(name) or getattr(math, name)
              for name in rules.EXPRESSION_FUNCTIONS}


def _accepts(args):
    """True for argument types among which a tagged dual is and every one is a number or dual."""
    return any(isinstance(a, TaggedDualType) for a in args) and all(
        level(a) is not None for a in args)


def _top(args):
    top = max(level(a) for a in args)
    kinds = tuple("d" if level(a) == top else "n" for a in args)
    lanes = {a.n for a, k in zip(args, kinds) if k == "d"}
    return top, kinds, lanes


def _nested_call(typingctx, rule_name, rule, args, primal=None):
    """``(signature, codegen)`` of a rule on tagged duals, lowered inline: the primal on the
    values, each derivative factor the rule's expression on the values (an operation of inner
    duals is the inner rule), each lane ``factor * partial`` summed over the differentiated
    arguments, in ordinary (dual) arithmetic. Typed by walking the same operations."""
    top, kinds, lanes = _top(args)
    if len(lanes) > 1:
        raise TypingError(
            f"{rule.primal}: duals of tag {top} with different lane counts {sorted(lanes)}; "
            "seed every dual of one derivative with the same N."
        )
    n = lanes.pop()
    primal = resolve_primal(rule.primal) if primal is None else primal
    dtype = result_dtype(primal, [innermost(a) for a in args])
    value_types = [a.value_type if k == "d" else a for a, k in zip(args, kinds)]
    terms = []  # (k, unit, source, constants) per differentiated argument with a factor
    for k, kind in enumerate(kinds):
        expr = expression(rule.derivatives[k])
        if kind == "d" and expr.unit != 0:
            terms.append((k, expr.unit, expr.source, expr.constants))

    def walk(emitter, values, partials, ans):
        """The lanes as ``(value, type)``, emitted or typed (``ans``: the primal's)."""
        emitter.names = {"ans": ans, **{name: (v, t) for name, v, t in
                                        zip(("x", "y"), values, value_types)}}
        factors = {k: emitter.value(source, constants)
                   for k, unit, source, constants in terms if unit is None}
        out = []
        for j in range(n):
            total = None
            for k, unit, _, _ in terms:
                lane = (partials[k][j] if partials else None, args[k].value_type)
                if unit == -1:
                    lane = emitter.call(operator.neg, (lane[1],), (lane[0],))
                elif unit != 1:
                    f = factors[k]
                    lane = emitter.call(operator.mul, (f[1], lane[1]), (f[0], lane[0]))
                total = lane if total is None else emitter.call(
                    operator.add, (total[1], lane[1]), (total[0], lane[0]))
            out.append(total if total is not None else emitter.constant(0.0))
        return out

    ans_type = typingctx.resolve_function_type(
        typingctx.resolve_value_type(primal), tuple(value_types), {}).return_type
    lanes_typed = walk(TypeWalk(typingctx, dtype, {}, _NAMESPACE), [None] * len(args), None,
                       (None, ans_type))
    ret = _holding(top, ans_type, [t for _, t in lanes_typed],
                   f"the value and lanes of {rule.primal} of {args}")

    def codegen(context, builder, sig, llargs):
        values, partials = [], {}
        for k, (a, kind, v) in enumerate(zip(args, kinds, llargs)):
            if kind != "d":  # a number or a lower-tag dual: a constant of this tag, whole
                values.append(v)
                continue
            value, lanes = value_and_partials(context, builder, a, v)
            values.append(value)
            partials[k] = [builder.extract_value(lanes, j) for j in range(n)]
        ans = lower_call(context, builder, primal, value_types, values)  # as plain code
        emitter = Emitter(quiet(context), builder, dtype, {}, _NAMESPACE)  # factors never raise
        return _build_cast(context, builder, ret, ans, walk(emitter, values, partials, ans))

    return ret(*args), codegen


def _register_rule(fn, rule_name, rule):
    nargs = len(rule.derivatives)
    primal = resolve_primal(rule.primal)

    def define(typingctx, args):
        if len(args) != nargs or not _accepts(args):
            return None
        # rules.lookup: a built-in rule replaced with rules.define(..., override=True)
        return _nested_call(typingctx, rule_name, rules.lookup(rule_name), args, primal)

    if nargs == 1:
        register_lowered(fn, lambda typingctx, a: define(typingctx, (a,)),
                         f"dualgpu_tagged_{rule_name}")
    else:
        register_lowered(fn, lambda typingctx, a, b: define(typingctx, (a, b)),
                         f"dualgpu_tagged_{rule_name}")


def _strip(args):
    """Sources that take the value of the highest-tag operands (comparisons, value-only)."""
    top = max(level(a) for a in args)
    return [f"{p}.value" if level(a) == top else p for p, a in zip(("a", "b"), args)]


def _register_comparison(fn):
    def typer(a, b):
        if not _accepts((a, b)):
            return None
        left, right = _strip((a, b))
        ns = {"_fn": fn}
        exec(f"def impl(a, b):\n    return _fn({left}, {right})\n", ns)
        return ns["impl"]

    overload(fn)(typer)


def _register_value_only(fn):
    def typer(x):  # (one named argument: numba's builtins int, round, bool refuse *args)
        if not _accepts((x,)):
            return None
        return lambda x: fn(x.value)

    overload(fn)(typer)
    if fn is round:  # round(x, ndigits) of a tagged dual: of its value, as for a float
        overload(fn)(_round_ndigits_typer(TaggedDualType))


def _register_missing(fn, dotted):
    def typer(*args):
        if any(isinstance(a, TaggedDualType) for a in args):
            if rules.definition_of(dotted) is not None:
                return None  # a rule added with dualgpu.rules.define: its own lowering
            raise TypingError(missing_rule_message(dotted, len(args)))
        return None

    overload(fn)(typer)


def _register_all():
    for kind, fn, name, rule in rule_targets():
        if kind == "rule":
            _register_rule(fn, name, rule)
        elif kind == "value_only":
            _register_value_only(fn)
        elif kind == "comparison":
            _register_comparison(fn)
        else:
            _register_missing(fn, name)
    register_variadic(min, _accepts)
    register_variadic(max, _accepts)
    register_divmod(_accepts)


_register_all()


# --- rules added with dualgpu.rules.define: second order as the table's rules ----------------
_DEFINED = set()


def _register_defined(fn, key, primal):
    """Lower ``fn`` (a defined rule's wrapper, or the math function / ufunc it names) on tagged
    duals from the rule defined under ``key``; ``primal`` computes the value (the wrapper:
    on inner duals, the first-order defined rule)."""
    if fn in _DEFINED:
        return
    _DEFINED.add(fn)
    nargs = len(rules.DEFINED[key].rule.derivatives)

    def define(typingctx, args):
        definition = rules.DEFINED.get(key)
        if definition is None or len(args) != nargs or not _accepts(args):
            return None
        return _nested_call(typingctx, key, definition.rule, args, primal)

    if nargs == 1:
        register_lowered(fn, lambda typingctx, a: define(typingctx, (a,)),
                         f"dualgpu_tagged_defined_{fn.__name__}")
    else:
        register_lowered(fn, lambda typingctx, a, b: define(typingctx, (a, b)),
                         f"dualgpu_tagged_defined_{fn.__name__}")


def _on_rule_defined(new, old):
    if new is None or new.key != new.name:
        return  # removed; or an override of a built-in rule (its lowering reads rules.lookup)
    _register_defined(new.wrapper, new.key, new.wrapper)
    if new.name.startswith("math."):  # math.exp2 in kernels: numba's own function, the value
        _register_defined(new.function, new.key, new.function)
    if new.ufunc is not None and new.ufunc.__name__ not in rules.NUMPY_UFUNCS:
        _register_defined(new.ufunc, new.key, new.ufunc)


rules.subscribe(_on_rule_defined)


@overload(float)
def _float_of_tagged(x):
    if isinstance(x, TaggedDualType):
        raise TypingError(
            "float(Dual) would drop the partials. Fix: keep the dual (arithmetic with plain "
            "floats promotes to a dual, and math functions take duals). d.value reads the "
            "value alone and silently drops the derivative: use it only where no derivative "
            "must flow."
        )


# --- arrays -------------------------------------------------------------------------------------

_ARRAY_MAKERS = {}


def array_maker(tag):
    """An intrinsic ``make(values, partials, lanes)`` building a tagged DualArray (a view)."""
    if tag in _ARRAY_MAKERS:
        return _ARRAY_MAKERS[tag]

    def make(typingctx, values, partials, lanes):
        if not isinstance(lanes, types.IntegerLiteral):
            raise TypingError("make tagged DualArray: the lane count must be a constant")
        ret = TaggedDualArrayType(values, partials, lanes.literal_value, tag)

        def codegen(context, builder, sig, args):
            s = cgutils.create_struct_proxy(ret)(context, builder)
            s.values = args[0]
            s.partials = args[1]
            if context.enable_nrt:
                context.nrt.incref(builder, values, args[0])
                context.nrt.incref(builder, partials, args[1])
            return s._getvalue()

        return ret(values, partials, lanes), codegen

    make.__name__ = f"make_dual_array_tag{tag}"
    _ARRAY_MAKERS[tag] = intrinsic(make)
    return _ARRAY_MAKERS[tag]


def _full_index(index, ndim):
    if isinstance(index, types.Integer):
        return ndim == 1
    return isinstance(index, types.BaseTuple) and len(index) == ndim and all(
        isinstance(t, types.Integer) for t in index)


_GETTERS = {}
_SETTERS = {}


def _index_names(ndim, is_tuple):
    names = [f"i{k}" for k in range(ndim)] if is_tuple else ["i"]
    unpack = f"    {', '.join(names)}, = i\n" if is_tuple else ""
    return unpack, ", ".join(names)


def _getter(ndim, n, tag, is_tuple):
    key = (ndim, n, tag, is_tuple)
    if key not in _GETTERS:
        unpack, idx = _index_names(ndim, is_tuple)
        lanes = ", ".join(f"p[{k}, {idx}]" for k in range(n))
        src = ("def getitem(a, i):\n" + unpack + "    p = a.partials\n"
               f"    return _make(a.values[{idx}], ({lanes},))\n")
        ns = {"_make": maker(tag)}
        exec(compile(src, f"<dualgpu tagged getitem {key}>", "exec"), ns)
        _GETTERS[key] = ns["getitem"]
    return _GETTERS[key]


def _setter(ndim, n, is_tuple, kind):
    key = (ndim, n, is_tuple, kind)
    if key not in _SETTERS:
        unpack, idx = _index_names(ndim, is_tuple)
        if kind == "same":
            body = f"    a.values[{idx}] = v.value\n    q = v.partials\n" + "".join(
                f"    p[{k}, {idx}] = q[{k}]\n" for k in range(n))
        else:
            body = f"    a.values[{idx}] = v\n" + "".join(
                f"    p[{k}, {idx}] = 0\n" for k in range(n))
        src = "def setitem(a, i, v):\n" + unpack + "    p = a.partials\n" + body
        ns = {}
        exec(compile(src, f"<dualgpu tagged setitem {key}>", "exec"), ns)
        _SETTERS[key] = ns["setitem"]
    return _SETTERS[key]


@overload(operator.getitem)
def _tagged_getitem(a, i):
    if not isinstance(a, TaggedDualArrayType):
        return None
    if _full_index(i, a.ndim):
        return _getter(a.ndim, a.n, a.tag, isinstance(i, types.BaseTuple))
    ok = isinstance(i, (types.Integer, types.SliceType)) or (
        isinstance(i, types.BaseTuple) and all(isinstance(t, (types.Integer, types.SliceType))
                                               for t in i))
    if not ok:
        raise TypingError(
            f"DualArray indexing: expected integers or slices, got {i}. Fancy/boolean indexing "
            "is not supported inside kernels.")
    rest = (", ".join(f"i[{k}]" for k in range(len(i))) if isinstance(i, types.BaseTuple)
            else "i")
    src = ("def getitem(a, i):\n    p_all = slice(None)\n"
           f"    return _make(a.values[i], a.partials[p_all, {rest}], _N)\n")
    ns = {"_make": array_maker(a.tag), "_N": a.n}
    exec(compile(src, "<dualgpu tagged getitem view>", "exec"), ns)
    return ns["getitem"]


@overload(operator.setitem)
def _tagged_setitem(a, i, v):
    if isinstance(a, (types.Array, DualArrayType)) and isinstance(v, TaggedDualType):
        raise TypingError(
            f"a dual of tag {v.tag} ({v}) is stored into {a}, which cannot hold its partials. "
            "Allocate the array through dualgpu.cuda while the driver runs (inside a nested "
            "derivative it allocates arrays of duals of duals), or as a DualArray of the same "
            "tag."
        )
    if not isinstance(a, TaggedDualArrayType):
        return None
    if not _full_index(i, a.ndim):
        raise TypingError(
            f"DualArray assignment inside compiled code needs one integer per dimension "
            f"({a.ndim}); got index {i}. Assign element by element.")
    lv = level(v)
    if lv is None:
        raise TypingError(f"cannot store {v} into {a}; expected a dual or a number.")
    if lv > a.tag:
        raise TypingError(
            f"cannot store a dual of tag {lv} into {a}: the outer derivative's partials would "
            "be dropped.")
    if lv == a.tag:
        if v.n != a.n:
            raise TypingError(
                f"storing a dual with {v.n} lanes into a DualArray with {a.n} lanes; every "
                "dual of one derivative must have the same lane count.")
        kind = "same"
    else:
        kind = "constant"
    return _setter(a.ndim, a.n, isinstance(i, types.BaseTuple), kind)


@overload(len)
def _tagged_len(a):
    if isinstance(a, TaggedDualArrayType):
        return lambda a: len(a.values)


array_attributes(TaggedDualArrayType)
