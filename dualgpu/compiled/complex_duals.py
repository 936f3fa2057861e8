"""Complex duals in compiled code: building one, number casts, boxing and ``typeof``.

A :class:`~dualgpu.compiled.types.ComplexDualType` is a struct of a complex value and a
``UniTuple`` of complex partials. This module makes them (:func:`make_complex_dual`), casts
numbers, complex numbers and real duals to them (a real dual's partials become complex
partials with a zero imaginary part), and moves them across the ``@njit`` boundary as the
host's complex :class:`~dualgpu.Dual`. The rules applied to them are
:mod:`dualgpu.compiled.complex_ops`'.
"""
import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import box, lower_cast, overload, unbox

from dualgpu.compiled.attributes import lanes_attribute
from dualgpu.compiled.boxing import box_struct, unbox_struct
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.compiled.types import (
    ComplexDualType, DualType, build_dual, cast_lane_values, complex_dual_type, make_dual,
    pack_lanes,
)
from dualgpu.core.dual import Dual

__all__ = ["make_complex_dual", "make_scalar_dual"]


@intrinsic
def make_complex_dual(typingctx, value, partials):
    """Build a complex dual from a complex value and a UniTuple of complex partials (each
    cast to the value's dtype)."""
    if not isinstance(value, types.Complex) or not isinstance(partials, types.UniTuple):
        raise TypingError(f"make_complex_dual(value, partials): got {value}, {partials}")
    ret = complex_dual_type(value, partials.count)

    def codegen(context, builder, sig, args):
        lanes = cast_lane_values(context, builder, args[1], partials, value)
        return build_dual(context, builder, ret, args[0],
                          pack_lanes(context, builder, ret.partials_type, lanes))

    return ret(value, partials), codegen


def make_scalar_dual(value, partials):
    """A dual scalar argument of a launcher from its value and lanes (compiled code only):
    :func:`~dualgpu.compiled.types.make_dual` for a real value, :func:`make_complex_dual`
    for a complex one (a complex Dual passed to a kernel)."""
    raise NotImplementedError("make_scalar_dual runs in compiled code only")


@overload(make_scalar_dual)
def _make_scalar_dual(value, partials):
    if isinstance(value, types.Complex):
        return lambda value, partials: make_complex_dual(value, partials)
    return lambda value, partials: make_dual(value, partials)


# --- casts ------------------------------------------------------------------------

@lower_cast(types.Float, ComplexDualType)
@lower_cast(types.Integer, ComplexDualType)
@lower_cast(types.Boolean, ComplexDualType)
@lower_cast(types.Complex, ComplexDualType)
def _number_to_complex_dual(context, builder, fromty, toty, val):
    value = context.cast(builder, val, fromty, toty.dtype)
    zero = context.get_constant_generic(builder, toty.dtype, 0j)
    return build_dual(context, builder, toty, value,
                      pack_lanes(context, builder, toty.partials_type, [zero] * toty.n))


@lower_cast(DualType, ComplexDualType)
@lower_cast(ComplexDualType, ComplexDualType)
def _dual_to_complex_dual(context, builder, fromty, toty, val):
    if fromty.n != toty.n or fromty.tracer:
        raise TypingError(f"cannot convert {fromty} to {toty}")
    src = cgutils.create_struct_proxy(fromty)(context, builder, value=val)
    value = context.cast(builder, src.value, fromty.dtype, toty.dtype)
    lanes = cast_lane_values(context, builder, src.partials, fromty.partials_type, toty.dtype)
    return build_dual(context, builder, toty, value,
                      pack_lanes(context, builder, toty.partials_type, lanes))


lanes_attribute(ComplexDualType)


# --- boxing: the host's complex Dual ----------------------------------------------------

def _complex_dual(value, partials, dtype):
    """The Python complex Dual of a boxed compiled one."""
    return Dual(value, np.asarray(partials, dtype=dtype), dtype=dtype)


@unbox(ComplexDualType)
def _unbox_complex_dual(typ, obj, c):
    return unbox_struct(typ, obj, c, (("value", "value", typ.dtype),
                                      ("_partials_tuple", "partials", typ.partials_type)))


@box(ComplexDualType)
def _box_complex_dual(typ, val, c):
    return box_struct(typ, val, c, (("value", typ.dtype), ("partials", typ.partials_type)),
                      _complex_dual, (str(typ.dtype),))
