"""numba typing and lowering of :class:`dualgpu.DualArray` (CPU and CUDA alike).

A ``DualArrayType`` is a struct of two arrays: ``values`` (shape S) and
``partials`` (shape (N, *S)). Indexing with integers yields a dual whose lanes
are read from ``partials[k, index]``; storing a dual writes them back; storing
a plain number writes zero partials. Any other index (slices, fewer indices
than dimensions) yields a DualArray view, and storing through it
(``tile[0:8] = u[8:16]``, ``out[k, :] = d``, ``row[:] = 0.0``) stores values and
partials alike. The lane count N is part of the type.

The type and its data model are :mod:`dualgpu.compiled.types`', its ``typeof``
:mod:`dualgpu.compiled.typeof`'s and its boxing :mod:`dualgpu.compiled.boxing`'s; this
module holds the operations: building, allocating, indexing, storing and ``len``.
"""
import functools
import operator

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.cpu import CPUContext
from numba.core.errors import TypingError
from numba.core.extending import (
    infer_getattr, lower_getattr, overload, register_jitable,
)
from numba.core.imputils import impl_ret_borrowed
from numba.core.typing.templates import AttributeTemplate
from numba.np import arrayobj

from dualgpu.compiled.attributes import array_attributes
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.compiled.lowering import lower_call, register_lowered
from dualgpu.compiled.types import (
    ComplexDualType, DualArrayType, DualType, TaggedDualType, build_dual, dual_array_type,
    pack_lanes,
)
from dualgpu.core.dualarray import DualArray

# the type is dualgpu.compiled.types'; DualArrayType and dual_array_type are re-exported
# here, next to the operations on dual arrays, as their users know them
__all__ = ["DualArrayType", "dual_array_type", "empty_dual_array", "make_dual_array"]


@intrinsic
def make_dual_array(typingctx, values, partials, lanes):
    """Build a DualArray from two arrays; ``lanes`` must be a compile-time integer."""
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("make_dual_array: the lane count must be a compile-time constant")
    if not isinstance(values, types.Array) or not isinstance(partials, types.Array):
        raise TypingError(f"make_dual_array(values, partials): got {values}, {partials}")
    ret = DualArrayType(values, partials, lanes.literal_value)

    def codegen(context, builder, sig, args):
        s = cgutils.create_struct_proxy(ret)(context, builder)
        s.values = args[0]
        s.partials = args[1]
        if context.enable_nrt:
            context.nrt.incref(builder, values, args[0])
            context.nrt.incref(builder, partials, args[1])
        return s._getvalue()

    return ret(values, partials, lanes), codegen


@register_jitable
def _empty_pair(shape, dtype, lanes):
    return np.empty(shape, dtype), np.empty((lanes,) + shape, dtype)


def empty_dual_array(shape, dtype, lanes):
    """Return an uninitialised host DualArray (callable from Python and compiled CPU code)."""
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    return DualArray(np.empty(shape, dtype), np.empty((lanes,) + shape, dtype))


@overload(empty_dual_array, prefer_literal=True)
def _empty_dual_array(shape, dtype, lanes):
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("empty_dual_array: lanes must be a compile-time constant")
    if isinstance(shape, types.Integer):
        def impl(shape, dtype, lanes):
            return make_dual_array(np.empty(shape, dtype), np.empty((lanes, shape), dtype), lanes)
    else:
        def impl(shape, dtype, lanes):
            return make_dual_array(np.empty(shape, dtype), np.empty((lanes,) + shape, dtype), lanes)
    return impl


# --- indexing ------------------------------------------------------------------------

def _index_parts(index, ndim):
    """Describe an index type: ('full', k) for k integer indices covering all dims, else None."""
    if isinstance(index, types.Integer):
        return 1 if ndim == 1 else None
    if isinstance(index, types.BaseTuple) and len(index) == ndim:
        if all(isinstance(t, types.Integer) for t in index):
            return ndim
    return None


def _lane_pointers(context, builder, partials_type, partials, index_type, index, n):
    """Pointers to ``partials[k, *index]`` for k < n (``index``: an integer or a tuple of
    them), with numba's own index handling: negative indices wrap around, and with
    ``NUMBA_BOUNDSCHECK`` every index is checked."""
    index_types, index = _unpack_index(builder, index_type, index)
    ary = context.make_array(partials_type)(context, builder, partials)
    shapes = cgutils.unpack_tuple(builder, ary.shape, partials_type.ndim)
    strides = cgutils.unpack_tuple(builder, ary.strides, partials_type.ndim)
    check = context.enable_boundscheck
    fixed = []
    for axis, (ty, value) in enumerate(zip(index_types, index), start=1):
        ind = arrayobj.fix_integer_index(context, builder, ty, value, shapes[axis])
        if check:
            cgutils.do_boundscheck(context, builder, ind, shapes[axis], axis)
        fixed.append(ind)
    if not isinstance(context, CPUContext):
        # on GPUs ptxas keeps n lane pointers live (more registers: heat2d's 16-lane step took
        # 128 instead of 80): each lane's address is computed where it is used
        pointers = []
        for k in range(n):
            lane = context.get_constant(types.intp, k)
            if check:
                cgutils.do_boundscheck(context, builder, lane, shapes[0], 0)
            pointers.append(cgutils.get_item_pointer2(context, builder, ary.data, shapes,
                                                      strides, partials_type.layout,
                                                      [lane] + fixed))
        return pointers
    zero = context.get_constant(types.intp, 0)
    if check:
        for k in (0, n - 1):
            cgutils.do_boundscheck(context, builder, context.get_constant(types.intp, k),
                                   shapes[0], 0)
    first = cgutils.get_item_pointer2(context, builder, ary.data, shapes, strides,
                                      partials_type.layout, [zero] + fixed)
    # on the CPU lane k is k lane strides further: one address computation, not n (the
    # stride of a 'C' or 'F' array comes from its shape: LLVM sees lanes-last lanes adjacent)
    itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
        context.get_data_type(partials_type.dtype)))
    if partials_type.layout == "F":
        lane_stride = itemsize
    elif partials_type.layout == "C":
        lane_stride = functools.reduce(builder.mul, shapes[1:], itemsize)
    else:
        lane_stride = strides[0]
    raw = builder.bitcast(first, ir.IntType(8).as_pointer())
    return [first] + [
        builder.bitcast(builder.gep(raw, [builder.mul(lane_stride, context.get_constant(
            types.intp, k))], inbounds=True), first.type) for k in range(1, n)]


def _unpack_index(builder, index_type, index):
    if isinstance(index_type, types.BaseTuple):
        return list(index_type.types), cgutils.unpack_tuple(builder, index, len(index_type))
    return [index_type], [index]


def _element_get(typingctx, a, i):
    """``a[i]`` with one integer per axis: the element's value and lanes, lowered in the
    caller (numba's own getitem reads the value, :func:`_lane_pointers` the lanes)."""
    if not isinstance(a, DualArrayType) or _index_parts(i, a.ndim) is None:
        return None
    if typingctx.resolve_function_type(operator.getitem, (a.values_type, i), {}) is None:
        return None  # numba cannot index the values so: its own error names the index
    ret = a.dual

    def codegen(context, builder, sig, args):
        arr = cgutils.create_struct_proxy(a)(context, builder, value=args[0])
        value, value_type = lower_call(context, builder, operator.getitem,
                                       (a.values_type, i), (arr.values, args[1]))
        pointers = _lane_pointers(context, builder, a.partials_type, arr.partials, i, args[1],
                                  a.n)
        lanes = [context.cast(builder, arrayobj.load_item(context, builder, a.partials_type, p),
                              a.partials_type.dtype, ret.lane_dtype) for p in pointers]
        value = context.cast(builder, value, value_type, ret.dtype)
        return build_dual(context, builder, ret, value,
                          pack_lanes(context, builder, ret.partials_type, lanes))

    return ret(a, i), codegen


def _element_set(typingctx, a, i, v):
    """``a[i] = v`` with one integer per axis: a dual's value and lanes, or a number and zero
    lanes, lowered in the caller (numba's own setitem stores the value, cast as it casts)."""
    if not isinstance(a, DualArrayType) or _index_parts(i, a.ndim) is None:
        return None
    duals = (DualType, ComplexDualType)
    numbers = (types.Float, types.Integer, types.Boolean)
    if isinstance(a.dtype, types.Complex):
        numbers += (types.Complex,)  # a real dual or a complex number: zero imaginary parts
    elif isinstance(v, (ComplexDualType, types.Complex)):
        raise TypingError(f"cannot store {v} into {a}: a complex number into a real DualArray "
                          "would drop its imaginary part. Fix: allocate the array complex "
                          "(e.g. dualgpu.dual_array(np.zeros(n, complex), lanes=N)), or store "
                          "z.real / abs(z).")
    if isinstance(v, duals):
        _check_compatible(a, v)
    elif not isinstance(v, numbers):
        raise TypingError(f"cannot store {v} into {a}; expected a Dual or a number.")
    if not (a.values_type.mutable and a.partials_type.mutable):
        raise TypingError(f"cannot store into {a}: its arrays are read-only. Store into a "
                          "DualArray of writable arrays (a copy).")

    def codegen(context, builder, sig, args):
        arr = cgutils.create_struct_proxy(a)(context, builder, value=args[0])
        if isinstance(v, duals):
            dual = cgutils.create_struct_proxy(v)(context, builder, value=args[2])
            value, value_type = dual.value, v.dtype
            lanes = [context.cast(builder, lane, v.lane_dtype, a.partials_type.dtype)
                     for lane in cgutils.unpack_tuple(builder, dual.partials, v.n)]
        else:
            value, value_type = args[2], v
            lanes = [context.get_constant_generic(builder, a.partials_type.dtype, 0)] * a.n
        lower_call(context, builder, operator.setitem, (a.values_type, i, value_type),
                   (arr.values, args[1], value))
        pointers = _lane_pointers(context, builder, a.partials_type, arr.partials, i, args[1],
                                  a.n)
        for pointer, lane in zip(pointers, lanes):
            arrayobj.store_item(context, builder, a.partials_type, lane, pointer)
        return context.get_dummy_value()

    return types.none(a, i, v), codegen


register_lowered(operator.getitem, _element_get, "dualgpu_dual_array_element")
register_lowered(operator.setitem, _element_set, "dualgpu_dual_array_store")


def _view_index_source(index, ndim):
    """Source for the partials index of a view: ``(slice(None), *index)``."""
    if isinstance(index, types.BaseTuple):
        return ", ".join(["p_all"] + [f"i[{k}]" for k in range(len(index))])
    return "p_all, i"


@overload(operator.getitem)
def _dual_array_getitem(a, i):
    if not isinstance(a, DualArrayType):
        return None
    if _index_parts(i, a.ndim) is not None:
        return None  # an element: _element_get
    ok = isinstance(i, (types.Integer, types.SliceType)) or (
        isinstance(i, types.BaseTuple)
        and all(isinstance(t, (types.Integer, types.SliceType)) for t in i)
    )
    if not ok:
        raise TypingError(
            f"DualArray indexing: expected integers or slices, got {i}. Fancy/boolean "
            "indexing is not supported inside kernels."
        )
    n = a.n
    src = (
        "def getitem(a, i):\n"
        "    p_all = slice(None)\n"
        "    return _make_dual_array(a.values[i], "
        f"a.partials[{_view_index_source(i, a.ndim)}], _N)\n"
    )
    ns = {"_make_dual_array": make_dual_array, "_N": n}
    exec(compile(src, "<dualgpu getitem view>", "exec"), ns)
    return ns["getitem"]


@overload(operator.setitem)
def _dual_array_setitem(a, i, v):
    if isinstance(a, types.Array) and isinstance(v, (DualType, ComplexDualType,
                                                     TaggedDualType)):
        raise TypingError(
            f"a Dual ({v}) is stored into a plain {a.dtype} array: its partials would be "
            "dropped. Allocate that array as a DualArray (dualgpu.dual_array, or "
            "dualgpu.cuda.device_array_like of a DualArray), or run the simulation under "
            "the driver (dualgpu.jvp / jacfwd), which allocates dual arrays for you."
        )
    if not isinstance(a, DualArrayType):
        return None
    if _index_parts(i, a.ndim) is not None:
        return None  # an element: _element_set
    return _slice_setter(a, i, v)


def _check_compatible(a, v):
    """Refuse to store ``v`` (a dual or DualArray) into ``a`` unless their lanes match."""
    if v.tracer != a.tracer:
        raise TypingError(
            f"cannot store {v} into {a}: tracers and tangent duals do not mix; seed every "
            "input of a sparsity detection run as a tracer."
        )
    if v.n != a.n:
        raise TypingError(
            f"storing a dual with {v.n} lanes into a DualArray with {a.n} lanes; every "
            "dual in one computation must have the same lane count."
        )


def _slice_setter(a, i, v):
    """``a[i] = v`` for an index with slices (``tile[0:8] = u[8:16]``, ``out[k, :] = d``).

    The values take ``v`` as numpy would (broadcasting included); the partials take
    ``v``'s lanes (a DualArray's partials, a dual's lanes broadcast) or zeros for plain
    numbers and arrays.
    """
    ok = isinstance(i, (types.Integer, types.SliceType)) or (
        isinstance(i, types.BaseTuple)
        and all(isinstance(t, (types.Integer, types.SliceType)) for t in i)
    )
    if not ok:
        raise TypingError(
            f"DualArray assignment: expected integers or slices as index, got {i}. Fancy or "
            "boolean indexing is not supported inside kernels."
        )
    where = _view_index_source(i, a.ndim)
    if isinstance(v, DualArrayType):
        _check_compatible(a, v)
        body = ("    a.values[i] = v.values\n"
                f"    a.partials[{where}] = v.partials\n")
        key = ("array", where)
    elif isinstance(v, (DualType, ComplexDualType)):
        _check_compatible(a, v)
        lane_index = where.replace("p_all", "{k}", 1)
        body = "    a.values[i] = v.value\n    q = v.partials\n" + "".join(
            f"    a.partials[{lane_index.format(k=k)}] = q[{k}]\n" for k in range(a.n)
        )
        key = ("dual", where, a.n)
    elif isinstance(v, (types.Array, types.Float, types.Integer, types.Boolean, types.Complex)):
        if isinstance(v, types.Array) and not isinstance(v.dtype, (types.Float, types.Integer,
                                                                   types.Boolean, types.Complex)):
            raise TypingError(f"cannot store {v} into {a}; expected numbers or a DualArray.")
        body = f"    a.values[i] = v\n    a.partials[{where}] = 0\n"
        key = ("plain", where)
    else:
        raise TypingError(
            f"cannot store {v} into a slice of {a}; expected a DualArray, a dual, a number "
            "or an array of numbers."
        )
    if key not in _SLICE_SETITEM:
        src = "def setitem(a, i, v):\n    p_all = slice(None)\n" + body
        ns = {}
        exec(compile(src, f"<dualgpu slice setitem {key}>", "exec"), ns)
        _SLICE_SETITEM[key] = ns["setitem"]
    return _SLICE_SETITEM[key]


_SLICE_SETITEM = {}


# --- a.T -------------------------------------------------------------------------------

def _transposed_type(a):
    """The type of ``a.T``: the values transposed as numba transposes them, the lane axis
    staying first."""
    if a.ndim == 1:
        return a
    flipped = {"C": "F", "F": "C"}.get(a.values_type.layout, "A")
    return DualArrayType(a.values_type.copy(layout=flipped), a.partials_type.copy(layout="A"),
                         a.n)


@infer_getattr
class _DualArrayTransposeTemplate(AttributeTemplate):
    key = DualArrayType

    def resolve_T(self, a):
        return _transposed_type(a)


def _permuted(context, builder, from_type, to_type, value, order):
    """A view of the array ``value`` with its axes in ``order`` (shape and strides permuted)."""
    ary = context.make_array(from_type)(context, builder, value)
    out = context.make_array(to_type)(context, builder)
    shapes = cgutils.unpack_tuple(builder, ary.shape, from_type.ndim)
    strides = cgutils.unpack_tuple(builder, ary.strides, from_type.ndim)
    arrayobj.populate_array(
        out, data=ary.data, shape=cgutils.pack_array(builder, [shapes[k] for k in order]),
        strides=cgutils.pack_array(builder, [strides[k] for k in order]),
        itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
    return out._getvalue()


@lower_getattr(DualArrayType, "T")
def _dual_array_transposed(context, builder, typ, value):
    """``a.T`` in a kernel: a view, as numba's ``ndarray.T``, its lanes axis staying first
    (the cpu backend and numba.cuda; numba's simulator transposes the DualArray itself)."""
    ret = _transposed_type(typ)
    if typ.ndim > 1:
        src = cgutils.create_struct_proxy(typ)(context, builder, value=value)
        order = tuple(range(typ.ndim - 1, -1, -1))
        out = cgutils.create_struct_proxy(ret)(context, builder)
        out.values = _permuted(context, builder, typ.values_type, ret.values_type, src.values,
                               order)
        out.partials = _permuted(context, builder, typ.partials_type, ret.partials_type,
                                 src.partials, (0,) + tuple(k + 1 for k in order))
        value = out._getvalue()
    return impl_ret_borrowed(context, builder, ret, value)


@overload(len)
def _dual_array_len(a):
    if isinstance(a, DualArrayType):
        return lambda a: len(a.values)


array_attributes(DualArrayType)
