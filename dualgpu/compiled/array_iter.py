"""``for v in dual_array:`` in compiled code (CPU and CUDA alike).

numba iterates over an array's first axis: the elements of a 1-D array, the rows of a
2-D one. A DualArray does the same: a 1-D DualArray yields duals, an N-D one DualArray
rows (views), exactly what ``a[i]`` gives for ``i in range(len(a))``. The iterator is
a struct of the array and a pointer to the next index, as numba's own array iterator.
The iterator's type and data model are :mod:`dualgpu.compiled.types`'
(``DualArrayType.iterator_type``); this module lowers ``getiter`` and ``iternext``.
"""
import operator

from numba import types
from numba.core import cgutils
from numba.core.extending import lower_builtin
from numba.core.imputils import impl_ret_borrowed, impl_ret_new_ref
from numba.core.typing.templates import signature

from dualgpu.compiled.types import DualArrayIterType, DualArrayType

__all__ = []


@lower_builtin("getiter", DualArrayType)
def _getiter(context, builder, sig, args):
    (array,) = args
    it = context.make_helper(builder, sig.return_type)
    it.index = cgutils.alloca_once_value(builder, context.get_constant(types.intp, 0))
    it.array = array
    if context.enable_nrt:  # NRT is off on CUDA
        context.nrt.incref(builder, sig.args[0], array)
    return impl_ret_new_ref(context, builder, sig.return_type, it._getvalue())


@lower_builtin("iternext", DualArrayIterType)
def _iternext(context, builder, sig, args):
    # the (value, valid) pair built here, not with numba's iternext_impl: numba-cuda takes
    # only lowerings defined outside numba's modules, and that wrapper is numba's
    (iter_type,) = sig.args
    it = context.make_helper(builder, iter_type, value=args[0])
    array_type = iter_type.array_type
    pair = context.make_helper(builder, sig.return_type)
    index = builder.load(it.index)
    length = context.compile_internal(builder, lambda a: len(a),
                                      signature(types.intp, array_type), [it.array])
    valid = builder.icmp_signed("<", index, length)
    pair.second = valid
    with builder.if_then(valid):
        pair.first = context.compile_internal(
            builder, lambda a, i: operator.getitem(a, i),
            signature(iter_type.yield_type, array_type, types.intp), [it.array, index])
        builder.store(builder.add(index, context.get_constant(types.intp, 1)), it.index)
    return impl_ret_borrowed(context, builder, sig.return_type, pair._getvalue())
