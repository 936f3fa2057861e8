"""numba typing and overloads of tagged and nested duals (second order), CPU and CUDA alike.

``TaggedDualType(value_type, n, tag)`` is a dual of tag 1 or more (tag 0 is the
first-order :class:`~dualgpu.compiled.types.DualType`): a struct of a value and a
``UniTuple(value_type, n)`` of partials, where ``value_type`` is a float (a
first-order dual of that tag) or a dual of a lower tag (a nested dual: a dual
of duals). ``TaggedDualArrayType`` is the matching DualArray: its ``values``
and lane-major ``partials`` are float arrays or DualArrays of a lower tag.

The overloads are generated from the same rule table as first order
(:mod:`dualgpu.rules`), with ordinary operators instead of lane intrinsics, so
that on nested duals each operation resolves to the first-order overload:

* the primal is the rule's primal applied to the values;
* each derivative factor is the rule's expression evaluated on the values
  (``cos(x)`` of an inner dual is the inner cos rule);
* each lane is ``factor * partial`` (+ the other argument's term), with
  ordinary dual arithmetic.

Tags keep perturbations apart: among the arguments the duals of the highest
tag are differentiated and everything else (numbers, duals of lower tags) is
a constant of them, carried in the value (see :mod:`dualgpu.core.nested`). The
first-order generators in :mod:`dualgpu.compiled.rules` never see these types.
"""
import math
import operator

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import intrinsic, lower_cast, overload, register_jitable

from dualgpu import rules
from dualgpu.compiled.attributes import array_attributes, lanes_attribute
from dualgpu.compiled.rules import (
    _round_ndigits_typer, register_variadic, resolve_primal, result_dtype, rule_targets,
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


_MAKERS = {}


def maker(tag):
    """An intrinsic ``make(value, lanes)`` building a dual of ``tag``; value and lanes are cast
    to their common type (a float lane next to a dual value becomes a constant dual)."""
    if tag in _MAKERS:
        return _MAKERS[tag]

    def make(typingctx, value, lanes):
        if not isinstance(lanes, types.BaseTuple) or len(lanes) == 0:
            raise TypingError(f"make tagged dual: lanes must be a non-empty tuple; got {lanes}")
        value_type = _combine_all([value] + list(lanes.types))
        if value_type is None or (level(value_type) or 0) >= tag:
            raise TypingError(
                f"a dual of tag {tag} cannot hold {value} and {lanes}: a value of a higher tag "
                "would lose its partials."
            )
        ret = tagged_type(value_type, len(lanes), tag)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], value, value_type)
            items = [
                context.cast(builder, builder.extract_value(args[1], k), t, value_type)
                for k, t in enumerate(lanes.types)
            ]
            return _build(context, builder, ret, v, items)

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


# --- overloads generated from the rule table -------------------------------------------------

def _innermost_value(x):
    """The innermost value of a (nested) dual, or the number itself (compiled code only)."""
    raise NotImplementedError("_innermost_value runs in compiled code only")


@overload(_innermost_value)
def _ov_innermost_value(x):
    if level(x) == -1:  # a number
        return lambda x: x
    if isinstance(x, (DualType, TaggedDualType)):
        return lambda x: _innermost_value(x.value)
    return None


@register_jitable
def _floor_of_value(x):
    return float_floor(_innermost_value(x))


@register_jitable
def _trunc_of_value(x):
    return float_trunc(_innermost_value(x))


@register_jitable
def _rint_of_value(x):
    return float_rint(_innermost_value(x))


@register_jitable
def _same_values(a, b):
    # the two may differ in precision (max of a float32 dual and a float64): compared as
    # float64, which holds every float32 exactly, as first order compares them cast to ans's
    return same_bits(np.float64(_innermost_value(a)), np.float64(_innermost_value(b)))


#: the rule expressions' functions on nested duals: the value-only ones (floor, trunc,
#: same) read the innermost values; the others are math's, whose dual overloads apply
_VALUE_FUNCTIONS = {"floor": _floor_of_value, "trunc": _trunc_of_value, "rint": _rint_of_value,
                    "same": _same_values}
_NAMESPACE = {name: _VALUE_FUNCTIONS.get(name) or getattr(math, name)
              for name in rules.EXPRESSION_FUNCTIONS}
_IMPLS = {}


def _accepts(args):
    """True for argument types among which a tagged dual is and every one is a number or dual."""
    return any(isinstance(a, TaggedDualType) for a in args) and all(
        level(a) is not None for a in args)


def _top(args):
    top = max(level(a) for a in args)
    kinds = tuple("d" if level(a) == top else "n" for a in args)
    lanes = {a.n for a, k in zip(args, kinds) if k == "d"}
    return top, kinds, lanes


def _generate(rule_name, rule, kinds, dtype, tag, n):
    """Source of a rule's implementation for tagged duals: ordinary arithmetic on the values."""
    key = (rule_name, kinds, dtype, tag, n)
    if key in _IMPLS:
        return _IMPLS[key]
    params = ["a", "b"][: len(kinds)]
    ns = dict(_NAMESPACE)
    T = np.float32 if dtype == types.float32 else np.float64
    ns.update(_primal=resolve_primal(rule.primal), _make=maker(tag), _ZERO=T(0))
    lines = [f"def impl({', '.join(params)}):"]
    for name, p, kind in zip(("x", "y"), params, kinds):
        lines.append(f"    {name} = {p}.value" if kind == "d" else f"    {name} = {p}")
    lines.append(f"    ans = _primal({', '.join(('x', 'y')[: len(kinds)])})")
    terms = []  # per differentiated argument: (unit or None, factor name, partials name)
    for k, (p, kind) in enumerate(zip(params, kinds)):
        if kind != "d":
            continue
        expr = expression(rule.derivatives[k])
        if expr.unit == 0:
            continue
        src = expr.source
        for cname, cvalue in expr.constants.items():
            ns[f"{cname}_{k}"] = T(cvalue)
            src = src.replace(cname, f"{cname}_{k}")
        if expr.unit is None:
            lines.append(f"    f{k} = {src}")
        lines.append(f"    p{k} = {p}.partials")
        terms.append((expr.unit, f"f{k}", f"p{k}"))
    lanes = []
    for j in range(n):
        parts = []
        for unit, f, p in terms:
            parts.append({1: f"{p}[{j}]", -1: f"-{p}[{j}]"}.get(unit, f"{f} * {p}[{j}]"))
        lanes.append(" + ".join(parts) if parts else "_ZERO")
    lines.append(f"    return _make(ans, ({', '.join(lanes)},))")
    source = "\n".join(lines)
    exec(compile(source, f"<dualgpu tagged rule {rule_name} {kinds} {dtype} tag {tag}>", "exec"),
         ns)
    impl = ns["impl"]
    impl.__dualgpu_source__ = source
    _IMPLS[key] = impl
    return impl


def _register_rule(fn, rule_name, rule):
    nargs = len(rule.derivatives)

    def typer(*args):
        if len(args) != nargs or not _accepts(args):
            return None
        top, kinds, lanes = _top(args)
        if len(lanes) > 1:
            raise TypingError(
                f"{rule.primal}: duals of tag {top} with different lane counts {sorted(lanes)}; "
                "seed every dual of one derivative with the same N."
            )
        dtype = result_dtype(resolve_primal(rule.primal), [innermost(a) for a in args])
        return _generate(rule_name, rule, kinds, dtype, top, lanes.pop())

    if nargs == 1:
        overload(fn)(lambda a: typer(a))
    else:
        overload(fn)(lambda a, b: typer(a, b))


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
    def typer(*args):
        if len(args) != 1 or not _accepts(args):
            return None
        return lambda x: fn(x.value)

    overload(fn)(typer)
    if fn is round:  # round(x, ndigits) of a tagged dual: of its value, as for a float
        overload(fn)(_round_ndigits_typer(TaggedDualType))


def _register_missing(fn, dotted):
    def typer(*args):
        if any(isinstance(a, TaggedDualType) for a in args):
            raise TypingError(missing_rule_message(dotted))
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


_register_all()


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
