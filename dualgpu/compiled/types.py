"""numba typing and data model of the dual number (CPU and CUDA alike).

``DualType(dtype, n)`` is a struct of the value and a ``UniTuple(dtype, n)`` of
partials, so the lanes live in registers. Everything here is registered with
numba core's generic registries from a module outside the ``numba.``
namespace, which both ``@njit`` and numba-cuda load (see the documentation's
"numba notes" page, ``docs/dev/numba-notes.md``).
The lane arithmetic is done by a few intrinsics that emit straight-line LLVM.
"""
import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import (
    box,
    intrinsic,
    lower_cast,
    register_jitable,
    make_attribute_wrapper,
    models,
    register_model,
    typeof_impl,
    unbox,
    NativeValue,
)
from numba.core.typeconv import Conversion

from dualgpu import nansafe
from dualgpu.core.dual import Dual
from dualgpu.errors import DualgpuError

__all__ = [
    "DualType",
    "dual_type",
    "as_float_type",
    "make_dual",
    "lanes_scale",
    "lanes_axpby",
    "lanes_neg",
    "lanes_cast",
    "lanes_zero",
    "lanes_or",
    "lanes_scale_nansafe",
    "lanes_axpby_nansafe",
    "same_bits",
    "float_floor",
    "float_trunc",
    "float_rint",
    "MAX_LANES",
    "TRACER_LANE",
    "GLOBAL_TRACER_LANE",
    "tracer_of_lane",
]

#: Largest lane count a compiled dual accepts (a soft limit for register use).
MAX_LANES = 64

_FLOATS = (types.float32, types.float64)


#: Lane dtype of the structural tracer: each lane is a 64-bit dependency set.
TRACER_LANE = types.uint64
#: Lane dtype of the global structural tracer (``tracer="global"``): the same bitsets, int64.
GLOBAL_TRACER_LANE = types.int64


def tracer_of_lane(lane_dtype):
    """The ``tracer`` mode of lanes of ``lane_dtype``: False, True (local) or "global"."""
    if lane_dtype == TRACER_LANE:
        return True
    return "global" if lane_dtype == GLOBAL_TRACER_LANE else False


class DualType(types.Type):
    """numba type of a dual number with value dtype ``dtype`` and ``n`` lanes.

    With ``tracer=True`` the lanes are 64-bit dependency bitsets combined by OR
    (the structural tracer that detects sparsity patterns) instead of tangents.
    """

    def __init__(self, dtype, n, tracer=False):
        if dtype not in _FLOATS:
            raise DualgpuError(f"Dual: value dtype must be float32 or float64; got {dtype}.")
        if not 1 <= n <= MAX_LANES:
            raise DualgpuError(f"Dual: lane count must be 1..{MAX_LANES}; got {n}.")
        self.dtype = dtype
        self.n = n
        self.tracer = tracer
        self.lane_dtype = (GLOBAL_TRACER_LANE if tracer == "global" else TRACER_LANE) if tracer \
            else dtype
        self.partials_type = types.UniTuple(self.lane_dtype, n)
        self.mode = nansafe.TYPE_KEY  # restored as it was by unpickling (numba's cache index)
        suffix = "".join(f", {m}" for m in self.mode)
        super().__init__(name=f"{'Tracer' if tracer else 'Dual'}({dtype}, {n}{suffix})")

    @property
    def key(self):
        return (self.dtype, self.n, self.tracer) + self.mode

    def unify(self, typingctx, other):
        """A branch that yields a float on one side and a dual on the other is a dual."""
        if isinstance(other, (types.Float, types.Integer, types.Boolean)):
            return dual_type(promote(self.dtype, other), self.n, self.tracer)
        if isinstance(other, DualType) and other.n == self.n and other.tracer == self.tracer:
            return dual_type(promote(self.dtype, other.dtype), self.n, self.tracer)
        return None

    def can_convert_from(self, typingctx, other):
        if isinstance(other, (types.Float, types.Integer)):
            return Conversion.safe
        if isinstance(other, DualType) and other.n == self.n and other.tracer == self.tracer:
            return Conversion.safe if other.dtype.bitwidth <= self.dtype.bitwidth else Conversion.unsafe
        return None


_DUAL_TYPES = {}


def dual_type(dtype, n, tracer=False):
    """Return the (cached) :class:`DualType` for ``dtype``, ``n`` lanes (and tracer mode)."""
    key = (dtype, n, tracer)
    if key not in _DUAL_TYPES:
        _DUAL_TYPES[key] = DualType(dtype, n, tracer)
    return _DUAL_TYPES[key]


def promote(*tys):
    """numba/numpy promotion of float/int scalar types to float32 or float64."""
    dtypes = []
    for t in tys:
        if isinstance(t, DualType):
            t = t.dtype
        if isinstance(t, types.Boolean):
            t = types.int64
        dtypes.append(np.dtype(str(t)) if not isinstance(t, types.Integer) else np.dtype(f"{'u' if not t.signed else ''}int{t.bitwidth}"))
    result = np.result_type(*dtypes)
    return types.float32 if result == np.float32 else types.float64


def as_float_type(ty):
    """The float type of a dual or number type."""
    return ty.dtype if isinstance(ty, DualType) else ty


@register_model(DualType)
class DualModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [("value", fe_type.dtype), ("partials", fe_type.partials_type)]
        super().__init__(dmm, fe_type, members)


make_attribute_wrapper(DualType, "value", "value")
make_attribute_wrapper(DualType, "partials", "partials")


@typeof_impl.register(Dual)
def _typeof_dual(val, c):
    if val.tag:  # tagged or nested (second order): dualgpu.compiled.nested
        from dualgpu.compiled.nested import typeof_tagged_dual

        return typeof_tagged_dual(val, c)
    return dual_type(types.float32 if val.dtype == np.float32 else types.float64, val.lanes)


# --- intrinsics: straight-line lane arithmetic ---------------------------------

def _build_dual(context, builder, dual_ty, value, partials):
    d = cgutils.create_struct_proxy(dual_ty)(context, builder)
    d.value = value
    d.partials = partials
    return d._getvalue()


def _lanes(builder, tup, n):
    return [builder.extract_value(tup, k) for k in range(n)]


def _pack(context, builder, tuple_ty, items):
    return context.make_tuple(builder, tuple_ty, items)


@intrinsic
def make_dual(typingctx, value, partials):
    """Build a dual from a float value and a UniTuple of partials of the same dtype.

    Partials of dtype uint64 make a structural tracer.
    """
    if not isinstance(partials, types.UniTuple) or value not in _FLOATS or partials.dtype not in (
        value, TRACER_LANE, GLOBAL_TRACER_LANE
    ):
        raise TypingError(f"make_dual(value, partials): got {value}, {partials}")
    ret = dual_type(value, partials.count, tracer=tracer_of_lane(partials.dtype))

    def codegen(context, builder, sig, args):
        return _build_dual(context, builder, ret, args[0], args[1])

    return ret(value, partials), codegen


def _cast_lanes(context, builder, tup, from_ty, to_dtype):
    return [context.cast(builder, v, from_ty.dtype, to_dtype) for v in _lanes(builder, tup, from_ty.count)]


@intrinsic
def lanes_scale(typingctx, factor, partials):
    """``factor * partials`` lane by lane, in the dtype of ``factor``."""
    ret = types.UniTuple(factor, partials.count)

    def codegen(context, builder, sig, args):
        f, tup = args
        lanes = _cast_lanes(context, builder, tup, partials, factor)
        return _pack(context, builder, ret, [builder.fmul(f, v) for v in lanes])

    return ret(factor, partials), codegen


@intrinsic
def lanes_axpby(typingctx, a, p, b, q):
    """``a * p + b * q`` lane by lane, in the dtype of ``a``."""
    ret = types.UniTuple(a, p.count)

    def codegen(context, builder, sig, args):
        fa, tp, fb, tq = args
        fb = context.cast(builder, fb, b, a)
        lp = _cast_lanes(context, builder, tp, p, a)
        lq = _cast_lanes(context, builder, tq, q, a)
        out = [builder.fadd(builder.fmul(fa, x), builder.fmul(fb, y)) for x, y in zip(lp, lq)]
        return _pack(context, builder, ret, out)

    return ret(a, p, b, q), codegen


def _nansafe_product(context, builder, factor, lane, dtype):
    """``factor * lane``, or exactly 0 where ``lane`` is 0 (an inf/nan factor cannot leak)."""
    zero = context.get_constant(dtype, 0.0)
    is_zero = builder.fcmp_ordered("==", lane, zero)
    return builder.select(is_zero, zero, builder.fmul(factor, lane))


@intrinsic
def lanes_scale_nansafe(typingctx, factor, partials):
    """``factor * partials`` lane by lane, a zero lane staying zero (NaN-safe mode)."""
    ret = types.UniTuple(factor, partials.count)

    def codegen(context, builder, sig, args):
        f, tup = args
        lanes = _cast_lanes(context, builder, tup, partials, factor)
        out = [_nansafe_product(context, builder, f, v, factor) for v in lanes]
        return _pack(context, builder, ret, out)

    return ret(factor, partials), codegen


@intrinsic
def lanes_axpby_nansafe(typingctx, a, p, b, q):
    """``a * p + b * q`` lane by lane, zero lanes contributing zero (NaN-safe mode)."""
    ret = types.UniTuple(a, p.count)

    def codegen(context, builder, sig, args):
        fa, tp, fb, tq = args
        fb = context.cast(builder, fb, b, a)
        lp = _cast_lanes(context, builder, tp, p, a)
        lq = _cast_lanes(context, builder, tq, q, a)
        out = [
            builder.fadd(_nansafe_product(context, builder, fa, x, a),
                         _nansafe_product(context, builder, fb, y, a))
            for x, y in zip(lp, lq)
        ]
        return _pack(context, builder, ret, out)

    return ret(a, p, b, q), codegen


@intrinsic
def same_bits(typingctx, a, b):
    """True when the floats ``a`` and ``b`` have the same bits (NaNs and signed zeros count)."""
    if a not in _FLOATS or b != a:
        raise TypingError(f"same_bits(a, b) takes two floats of one dtype; got {a}, {b}")

    def codegen(context, builder, sig, args):
        as_int = ir.IntType(a.bitwidth)
        left, right = (builder.bitcast(v, as_int) for v in args)
        return builder.icmp_unsigned("==", left, right)

    return types.boolean(a, b), codegen


def _float_rounding(name, llvm_name):
    def typer(typingctx, x):
        if x not in _FLOATS:
            raise TypingError(f"{name}(x) takes a float32 or float64; got {x}")

        def codegen(context, builder, sig, args):
            fn = builder.module.declare_intrinsic(llvm_name, [args[0].type])
            return builder.call(fn, args)

        return x(x), codegen

    typer.__name__ = name
    return intrinsic(typer)


#: ``floor``/``trunc`` returning a float of the argument's dtype (numba's ``math.floor``
#: returns an int64, which saturates for |x| >= 2**63). CPU and CUDA alike.
float_floor = _float_rounding("float_floor", "llvm.floor")
float_trunc = _float_rounding("float_trunc", "llvm.trunc")


@register_jitable
def float_rint(x):
    """Round half to even, as ``np.rint``, in the argument's dtype (the quotient of the
    ``%``/``fmod``/``remainder`` rules). Built on floor: NVVM takes neither ``llvm.rint``
    nor ``llvm.round``, and ``llvm.roundeven`` leaves an unresolved call in PTX."""
    r = float_floor(x)
    d = x - r  # exact; NaN for NaN and +-inf, which then come back unchanged
    if d > 0.5 or (d == 0.5 and float_floor(r * 0.5) * 2 != r):
        r += d / d  # 1 in x's dtype (a literal 1 would promote float32 to float64)
    return math.copysign(r, x)  # rint keeps x's sign: -0.5 -> -0.0


def _lanes_binary(name, build):
    """An intrinsic ``name(dtype_of, p, q)``: ``build(builder)(p_k, q_k)`` lane by lane."""

    def typer(typingctx, dtype_of, p, q):
        ret = types.UniTuple(dtype_of, p.count)

        def codegen(context, builder, sig, args):
            lp = _cast_lanes(context, builder, args[1], p, dtype_of)
            lq = _cast_lanes(context, builder, args[2], q, dtype_of)
            op = build(builder)
            return _pack(context, builder, ret, [op(x, y) for x, y in zip(lp, lq)])

        return ret(dtype_of, p, q), codegen

    typer.__name__ = name
    return intrinsic(typer)


#: ``p + q`` and ``p - q`` lane by lane, converted to the dtype of ``dtype_of``.
lanes_add = _lanes_binary("lanes_add", lambda builder: builder.fadd)
lanes_sub = _lanes_binary("lanes_sub", lambda builder: builder.fsub)


@intrinsic
def lanes_neg(typingctx, dtype_of, p):
    """``-p`` lane by lane, converted to the dtype of ``dtype_of``."""
    ret = types.UniTuple(dtype_of, p.count)

    def codegen(context, builder, sig, args):
        lp = _cast_lanes(context, builder, args[1], p, dtype_of)
        # fsub from -0.0 rather than fneg: NVVM's IR dialect predates fneg
        minus_zero = context.get_constant(dtype_of, -0.0)
        return _pack(context, builder, ret, [builder.fsub(minus_zero, x) for x in lp])

    return ret(dtype_of, p), codegen


@intrinsic
def lanes_cast(typingctx, dtype_of, p):
    """``p`` converted to the dtype of ``dtype_of`` (a float value)."""
    ret = types.UniTuple(dtype_of, p.count)

    def codegen(context, builder, sig, args):
        return _pack(context, builder, ret, _cast_lanes(context, builder, args[1], p, dtype_of))

    return ret(dtype_of, p), codegen


@intrinsic
def lanes_or(typingctx, p, q):
    """``p | q`` lane by lane (structural tracer: union of dependency sets)."""
    ret = p

    def codegen(context, builder, sig, args):
        lp = _lanes(builder, args[0], p.count)
        lq = _lanes(builder, args[1], q.count)
        return _pack(context, builder, ret, [builder.or_(x, y) for x, y in zip(lp, lq)])

    return ret(p, q), codegen


@intrinsic
def lanes_zero(typingctx, like):
    """Zero partials shaped like the partials of the dual ``like``."""
    ret = like.partials_type

    def codegen(context, builder, sig, args):
        zero = context.get_constant(like.lane_dtype, 0)
        return _pack(context, builder, ret, [zero] * like.n)

    return ret(like), codegen


# --- casts ------------------------------------------------------------------------

@lower_cast(types.Float, DualType)
@lower_cast(types.Integer, DualType)
@lower_cast(types.Boolean, DualType)
def _number_to_dual(context, builder, fromty, toty, val):
    value = context.cast(builder, val, fromty, toty.dtype)
    zero = context.get_constant(toty.lane_dtype, 0)
    partials = _pack(context, builder, toty.partials_type, [zero] * toty.n)
    return _build_dual(context, builder, toty, value, partials)


@lower_cast(DualType, DualType)
def _dual_to_dual(context, builder, fromty, toty, val):
    if fromty.n != toty.n or fromty.tracer != toty.tracer:
        raise TypingError(f"cannot convert {fromty} to {toty}")
    src = cgutils.create_struct_proxy(fromty)(context, builder, value=val)
    value = context.cast(builder, src.value, fromty.dtype, toty.dtype)
    lanes = _cast_lanes(context, builder, src.partials, fromty.partials_type, toty.lane_dtype)
    return _build_dual(context, builder, toty, value, _pack(context, builder, toty.partials_type, lanes))


# --- boxing (CPU: Dual arguments and results of @njit functions) ---------------

@unbox(DualType)
def _unbox_dual(typ, obj, c):
    value_obj = c.pyapi.object_getattr_string(obj, "value")
    tuple_obj = c.pyapi.object_getattr_string(obj, "_partials_tuple")
    value = c.unbox(typ.dtype, value_obj)
    partials = c.unbox(typ.partials_type, tuple_obj)
    c.pyapi.decref(value_obj)
    c.pyapi.decref(tuple_obj)
    result = _build_dual(c.context, c.builder, typ, value.value, partials.value)
    is_error = c.builder.or_(value.is_error, partials.is_error)
    return NativeValue(result, is_error=is_error)


@box(DualType)
def _box_dual(typ, val, c):
    d = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    value_obj = c.box(typ.dtype, d.value)
    tuple_obj = c.box(typ.partials_type, d.partials)
    maker = Dual._from_float32 if typ.dtype == types.float32 else Dual._from_float64
    cls = c.pyapi.unserialize(c.pyapi.serialize_object(maker))
    out = c.pyapi.call_function_objargs(cls, (value_obj, tuple_obj))
    c.pyapi.decref(value_obj)
    c.pyapi.decref(tuple_obj)
    c.pyapi.decref(cls)
    return out
