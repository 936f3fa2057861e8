"""Per-thread storage of any numba type: one fixed-size byte row per thread.

Variables that live across a barrier are kept per thread between regions.
Numbers and booleans go into numpy arrays of their dtype; every other type
(duals, arrays and array views, dual arrays, tuples, records...) goes into
*slots*: a C-contiguous ``uint8`` array of shape ``(n, size)`` whose row ``t``
holds thread ``t``'s value in numba's data layout. The type is given as a
compile-time type reference (a numba type bound as a global), so one set of
intrinsics serves every type:

- ``slots_new(n, T)``: zeroed storage for n values of type T;
- ``slot_put(slots, t, value, T)``: store ``value`` (cast to T) into row t;
- ``slot_get(slots, t, T)``: load row t as a T;
- ``slots_release(slots, T)``: drop the references held by the rows.

With numba's reference counting (NRT) enabled, a stored value holds a
reference (the previous one is released), a loaded value is a new reference,
and ``slots_release`` releases what is left, so arrays made inside a kernel
stay alive between regions; rows start zeroed, and releasing a null
reference is a no-op. Compiled without NRT (the usual case), there is no
counting at all.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.core.errors import TypingError

from dualgpu.backends.cpu import COMPILED_CODE_ONLY
from dualgpu.compiled.intrinsics import intrinsic

#: helpers called from compiled block code only
_compiled_only = njit(**COMPILED_CODE_ONLY)

__all__ = ["slots_new", "slot_put", "slot_get", "slots_release", "slot_size"]

#: Rows are padded to a multiple of this many bytes (aligned loads and stores).
ALIGN = 16


def _instance(ty, what):
    if isinstance(ty, types.TypeRef):
        return ty.instance_type
    if isinstance(ty, types.NumberClass):
        return ty.instance_type
    raise TypingError(f"{what}: expected a numba type reference; got {ty}")


def _row_size(context, ty):
    data_type = context.get_data_type(ty)
    size = context.get_abi_sizeof(data_type)
    return max(ALIGN, (size + ALIGN - 1) // ALIGN * ALIGN)


def _row_pointer(context, builder, slots_type, slots, t, ty):
    array = context.make_array(slots_type)(context, builder, slots)
    stride = cgutils.unpack_tuple(builder, array.strides, 2)[0]
    offset = builder.mul(t, stride)
    base = builder.ptrtoint(array.data, ir.IntType(64))
    address = builder.add(base, builder.sext(offset, ir.IntType(64))
                          if offset.type.width < 64 else offset)
    return builder.inttoptr(address, context.get_data_type(ty).as_pointer())


def _check_slots(slots, what):
    if not (isinstance(slots, types.Array) and slots.ndim == 2 and slots.dtype == types.uint8):
        raise TypingError(f"{what}: expected a 2-D uint8 slot array; got {slots}")


@intrinsic
def slot_size(typingctx, ty):
    """The row size in bytes for values of type ``ty`` (a compile-time constant)."""
    instance = _instance(ty, "slot_size")

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, _row_size(context, instance))

    return types.intp(ty), codegen


@_compiled_only
def slots_new(n, ty):
    """Zeroed storage for ``n`` values of the type ``ty``."""
    return np.zeros((n, slot_size(ty)), np.uint8)


@intrinsic
def slot_put(typingctx, slots, t, value, ty):
    """Store ``value`` (cast to ``ty``) into row ``t`` of ``slots``."""
    _check_slots(slots, "slot_put")
    instance = _instance(ty, "slot_put")
    if value != instance and typingctx.can_convert(value, instance) is None:
        raise TypingError(
            f"a value of type {value} is kept per thread in storage of type {instance} (the "
            "type numba gives the variable over the whole kernel), and cannot be converted "
            "to it. Give the variable one type throughout the kernel."
        )

    def codegen(context, builder, signature, args):
        slots_value, index, stored = args[0], args[1], args[2]
        stored = context.cast(builder, stored, value, instance)
        pointer = _row_pointer(context, builder, slots, slots_value, index, instance)
        if context.enable_nrt:
            context.nrt.incref(builder, instance, stored)
            old = context.unpack_value(builder, instance, pointer)
            context.nrt.decref(builder, instance, old)
        context.pack_value(builder, instance, stored, pointer)
        return context.get_dummy_value()

    return types.none(slots, t, value, ty), codegen


@intrinsic
def slot_get(typingctx, slots, t, ty):
    """Load row ``t`` of ``slots`` as a value of the type ``ty``."""
    _check_slots(slots, "slot_get")
    instance = _instance(ty, "slot_get")

    def codegen(context, builder, signature, args):
        pointer = _row_pointer(context, builder, slots, args[0], args[1], instance)
        value = context.unpack_value(builder, instance, pointer)
        if context.enable_nrt:
            context.nrt.incref(builder, instance, value)
        return value

    return instance(slots, t, ty), codegen


@intrinsic
def _slot_release(typingctx, slots, t, ty):
    _check_slots(slots, "slots_release")
    instance = _instance(ty, "slots_release")

    def codegen(context, builder, signature, args):
        if context.enable_nrt:
            pointer = _row_pointer(context, builder, slots, args[0], args[1], instance)
            context.nrt.decref(builder, instance, context.unpack_value(builder, instance, pointer))
            builder.store(cgutils.get_null_value(pointer.type.pointee), pointer)
        return context.get_dummy_value()

    return types.none(slots, t, ty), codegen


@_compiled_only
def slots_release(slots, ty):
    """Drop the references held by every row of ``slots`` (no-op without NRT)."""
    for t in range(slots.shape[0]):
        _slot_release(slots, t, ty)
