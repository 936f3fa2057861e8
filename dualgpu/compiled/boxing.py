"""Boxing and unboxing of compiled duals and dual arrays (CPU: arguments and results of
``@njit`` functions).

Each of the four types (:mod:`dualgpu.compiled.types`) is a struct of two members, and
crosses the boundary the same way: unboxed by reading two attributes of the Python object
(:func:`unbox_struct`), boxed by calling a Python function on the two members and a few
constants (:func:`box_struct`).

Examples
--------
>>> from numba import njit
>>> from dualgpu import Dual
>>> @njit
... def twice(x):
...     return x + x
>>> twice(Dual(1.5, [1.0, -2.0])).partials.tolist()
[2.0, -4.0]
"""
from numba import types
from numba.core import cgutils
from numba.core.extending import NativeValue, box, unbox

from dualgpu.compiled.types import DualArrayType, DualType, TaggedDualArrayType, TaggedDualType
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray

__all__ = ["unbox_struct", "box_struct"]


def unbox_struct(typ, obj, c, fields):
    """Unbox a Python object into the struct of ``typ``: ``fields`` are ``(attribute of obj,
    struct member, numba type)`` (a DualArray's values and partials, a dual's value and
    partials tuple)."""
    s = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    is_error = cgutils.false_bit
    for attribute, member, member_type in fields:
        member_obj = c.pyapi.object_getattr_string(obj, attribute)
        native = c.unbox(member_type, member_obj)
        c.pyapi.decref(member_obj)
        setattr(s, member, native.value)
        is_error = c.builder.or_(is_error, native.is_error)
    return NativeValue(s._getvalue(), is_error=is_error)


def box_struct(typ, val, c, fields, maker, constants=()):
    """Box the struct ``val`` of ``typ`` as ``maker(*members, *constants)``: ``fields`` are
    ``(struct member, numba type)``; ``maker`` is a picklable Python callable, ``constants``
    ints or picklable objects passed after the members (a tag, a dtype name)."""
    s = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    args = [c.box(member_type, getattr(s, member)) for member, member_type in fields]
    for constant in constants:
        if isinstance(constant, int):
            args.append(c.pyapi.long_from_longlong(
                c.context.get_constant(types.longlong, constant)))
        else:
            args.append(c.pyapi.unserialize(c.pyapi.serialize_object(constant)))
    maker_obj = c.pyapi.unserialize(c.pyapi.serialize_object(maker))
    out = c.pyapi.call_function_objargs(maker_obj, args)
    for obj in args + [maker_obj]:
        c.pyapi.decref(obj)
    return out


# --- first-order duals ---------------------------------------------------------------

@unbox(DualType)
def _unbox_dual(typ, obj, c):
    return unbox_struct(typ, obj, c, (("value", "value", typ.dtype),
                                      ("_partials_tuple", "partials", typ.partials_type)))


@box(DualType)
def _box_dual(typ, val, c):
    maker = Dual._from_float32 if typ.dtype == types.float32 else Dual._from_float64
    return box_struct(typ, val, c, (("value", typ.dtype), ("partials", typ.partials_type)),
                      maker)


@unbox(DualArrayType)
def _unbox_dual_array(typ, obj, c):
    return unbox_struct(typ, obj, c, (("values", "values", typ.values_type),
                                      ("partials", "partials", typ.partials_type)))


@box(DualArrayType)
def _box_dual_array(typ, val, c):
    return box_struct(typ, val, c, (("values", typ.values_type),
                                    ("partials", typ.partials_type)), DualArray)


# --- tagged and nested duals (second order) --------------------------------------------

def _tagged_dual(value, partials, tag, dtype):
    """The Python Dual of a boxed tagged dual (its value a float or a dual of a lower tag)."""
    if isinstance(value, Dual):
        return Dual(value, list(partials), tag=tag)
    return Dual(value, partials, dtype=dtype, tag=tag)


def _tagged_dual_array(values, partials, tag):
    """The Python DualArray of a boxed tagged dual array."""
    return DualArray(values, partials, tag=tag)


@unbox(TaggedDualType)
def _unbox_tagged(typ, obj, c):
    return unbox_struct(typ, obj, c, (("value", "value", typ.value_type),
                                      ("_partials_tuple", "partials", typ.partials_type)))


@box(TaggedDualType)
def _box_tagged(typ, val, c):
    return box_struct(typ, val, c, (("value", typ.value_type),
                                    ("partials", typ.partials_type)),
                      _tagged_dual, (typ.tag, str(typ.dtype)))


@unbox(TaggedDualArrayType)
def _unbox_tagged_array(typ, obj, c):
    return unbox_struct(typ, obj, c, (("values", "values", typ.values_type),
                                      ("partials", "partials", typ.partials_type)))


@box(TaggedDualArrayType)
def _box_tagged_array(typ, val, c):
    return box_struct(typ, val, c, (("values", typ.values_type),
                                    ("partials", typ.partials_type)),
                      _tagged_dual_array, (typ.tag,))
