"""What the cpu backend's rewritten source calls: local arrays, atomics, int conversions.

The rewriter (:mod:`dualgpu.backends.cpu.rewrite`) turns ``cuda.local.array``,
``cuda.atomic.*``, ``math.floor/ceil/trunc``, ``**`` and ``cuda.fma`` into calls of
``_dg_*`` names; :data:`RUNTIME` binds those names in every translated function's
namespace. CUDA threads run one after another on this backend, so the atomics are
plain read-modify-writes that return the old value.
"""
import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import overload
from numba.np import numpy_support
from numba.np.arrayobj import populate_array

from dualgpu.compiled.arrays import empty_dual_array, make_dual_array
from dualgpu.compiled.intrinsics import intrinsic
from dualgpu.core import float_to_int as _float_to_int
from dualgpu.core import int_power as _int_power
from dualgpu.backends.cpu import remainder as _remainder
from dualgpu.core.dualarray import DualArray
from dualgpu.backends.common.local_array_types import literal_shape, scalar_dtype
from dualgpu.backends.cpu.blocks import runtime as _blocks_runtime
from dualgpu.backends.cpu import bits as _bits
from dualgpu.backends.cpu.fused import cpu_fma

__all__ = ["ATOMIC_OPS", "RUNTIME", "FLOAT_TO_INT", "stack_array", "tracer_local_array",
           "global_tracer_local_array", "TRACER_LOCAL_ARRAYS", "tracer_lane_dtype"]

#: The ``cuda.atomic`` functions this backend runs (``_dg_atomic_<op>`` in :data:`RUNTIME`).
ATOMIC_OPS = (
    "add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor",
    "exch", "inc", "dec", "cas", "compare_and_swap",
)


#: the dtypes of scratch that becomes dual in a dual run (a dual is float32 or float64)
_DUAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _dg_local_array(shape, dtype, lanes):
    """Return scratch like ``cuda.local.array`` (a DualArray when lanes > 0 and dtype is float).

    ``lanes`` must be a compile-time constant: 0 for a plain run; N for a dual
    run, where float scratch becomes a dual array with N partials (from
    ``dualgpu.compiled.arrays.empty_dual_array``; integer scratch stays plain).
    In compiled code plain scratch lives on the stack, as on a GPU, so it needs
    a compile-time constant shape (numba.cuda requires one too).
    """
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    dtype = np.dtype(dtype)
    if lanes and dtype in _DUAL_DTYPES:  # (float16 scratch stays plain, as on the GPU)
        return empty_dual_array(shape, dtype, lanes)
    return np.empty(shape, dtype)


@intrinsic(prefer_literal=True)
def stack_array(typingctx, shape, dtype, lanes):
    """``cuda.local.array`` for plain runs: a C-ordered array on the caller's stack.

    Like CUDA's local memory it needs a compile-time constant shape and lives
    until the function returns; it has no meminfo, so it works without NRT.
    ``lanes`` is ignored (it is 0: this is bound as ``_dg_local_array`` only in
    plain builds).
    """
    dims = literal_shape(shape)
    element = scalar_dtype(dtype)
    if element is None:
        raise TypingError(
            f"cuda.local.array: dtype must be a numba or numpy scalar type; got {dtype}."
        )
    if dims is None or min(dims, default=1) < 0:
        raise TypingError(
            "cuda.local.array: the shape must be a compile-time constant int or tuple of ints "
            "(a literal, or a module-level or closure constant), as numba.cuda requires; got "
            f"{shape}."
        )
    array_type = types.Array(element, len(dims), "C")

    def codegen(context, builder, signature, args):
        data_type = context.get_data_type(element)
        itemsize = context.get_abi_sizeof(data_type)
        count = int(np.prod(dims)) if dims else 1
        size = context.get_constant(types.intp, max(count, 1))
        data = cgutils.alloca_once(builder, data_type, size=size)
        strides, step = [], itemsize
        for d in reversed(dims):
            strides.insert(0, step)
            step *= d
        array = context.make_array(array_type)(context, builder)
        intp = lambda v: context.get_constant(types.intp, v)  # noqa: E731
        populate_array(
            array, data=data, shape=[intp(d) for d in dims], strides=[intp(v) for v in strides],
            itemsize=intp(itemsize), meminfo=None,
        )
        return array._getvalue()

    return array_type(shape, dtype, lanes), codegen


def _local_array_lanes(dtype, lanes):
    """(lanes, True for a float element): the checks shared by the local-array overloads."""
    if not isinstance(lanes, types.IntegerLiteral):
        raise TypingError("_dg_local_array: lanes must be a compile-time integer constant")
    element = scalar_dtype(dtype)
    if element is None:
        raise TypingError(
            f"cuda.local.array: dtype must be a numba or numpy scalar type; got {dtype}."
        )
    return lanes.literal_value, element in (types.float32, types.float64)  # (not float16)


@overload(_dg_local_array, prefer_literal=True, jit_options={"inline": "always"})
def _ov_local_array(shape, dtype, lanes):
    n_lanes, is_float = _local_array_lanes(dtype, lanes)
    if n_lanes and is_float:
        def dual_impl(shape, dtype, lanes):
            return empty_dual_array(shape, dtype, n_lanes)

        return dual_impl

    def plain_impl(shape, dtype, lanes):
        return np.empty(shape, dtype)

    return plain_impl


def tracer_lane_dtype(tracer):
    """The lane dtype of a tracer mode: uint64 (local, ``True``) or int64 (``"global"``)."""
    return np.int64 if tracer == "global" else np.uint64


def _tracer_local_array(lane_dtype):
    def tracer_local_array(shape, dtype, lanes):
        """``cuda.local.array`` in a sparsity-detection run: float scratch of tracer lanes.

        Bound as ``_dg_local_array`` when the launch's duals are structural tracers
        (dependency-bitset partials: uint64 local, int64 global), so that the kernel can
        store tracers in its scratch as it stores tangent duals in a derivative run.
        """
        dtype = np.dtype(numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type)
                         else dtype)
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        if lanes and dtype in _DUAL_DTYPES:
            return DualArray(np.empty(shape, dtype), np.zeros((lanes,) + shape, lane_dtype))
        return np.empty(shape, dtype)

    @overload(tracer_local_array, prefer_literal=True, jit_options={"inline": "always"})
    def _ov_tracer_local_array(shape, dtype, lanes):
        n_lanes, is_float = _local_array_lanes(dtype, lanes)
        if n_lanes and is_float:
            if isinstance(shape, types.Integer):
                def tracer_impl(shape, dtype, lanes):
                    return make_dual_array(np.empty(shape, dtype),
                                           np.zeros((n_lanes, shape), lane_dtype), n_lanes)
            else:
                def tracer_impl(shape, dtype, lanes):
                    return make_dual_array(np.empty(shape, dtype),
                                           np.zeros((n_lanes,) + shape, lane_dtype), n_lanes)

            return tracer_impl

        def plain_impl(shape, dtype, lanes):
            return np.empty(shape, dtype)

        return plain_impl

    return tracer_local_array


tracer_local_array = _tracer_local_array(np.uint64)
global_tracer_local_array = _tracer_local_array(np.int64)
#: tracer mode -> the ``cuda.local.array`` of a detection run in that mode
TRACER_LOCAL_ARRAYS = {True: tracer_local_array, "global": global_tracer_local_array}


@njit
def _dg_atomic_add(ary, idx, val):
    old = ary[idx]
    ary[idx] = old + val
    return old


@njit
def _dg_atomic_sub(ary, idx, val):
    old = ary[idx]
    ary[idx] = old - val
    return old


@njit
def _dg_atomic_max(ary, idx, val):
    old = ary[idx]
    if val > old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_min(ary, idx, val):
    old = ary[idx]
    if val < old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_nanmax(ary, idx, val):
    old = ary[idx]
    if old != old or val > old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_nanmin(ary, idx, val):
    old = ary[idx]
    if old != old or val < old:
        ary[idx] = val
    return old


@njit
def _dg_atomic_and_(ary, idx, val):
    old = ary[idx]
    ary[idx] = old & val
    return old


@njit
def _dg_atomic_or_(ary, idx, val):
    old = ary[idx]
    ary[idx] = old | val
    return old


@njit
def _dg_atomic_xor(ary, idx, val):
    old = ary[idx]
    ary[idx] = old ^ val
    return old


@njit
def _dg_atomic_exch(ary, idx, val):
    old = ary[idx]
    ary[idx] = val
    return old


@njit
def _dg_atomic_inc(ary, idx, val):
    old = ary[idx]
    ary[idx] = 0 if old >= val else old + 1
    return old


@njit
def _dg_atomic_dec(ary, idx, val):
    old = ary[idx]
    ary[idx] = val if (old == 0 or old > val) else old - 1
    return old


@njit
def _dg_atomic_cas(ary, idx, old, val):
    current = ary[idx]
    if current == old:
        ary[idx] = val
    return current


@njit
def _dg_atomic_compare_and_swap(ary, old, val):
    current = ary[0]
    if current == old:
        ary[0] = val
    return current


#: Runtime name -> function, bound in the namespace of every translated function.
RUNTIME = {"_dg_local_array": _dg_local_array, "_dg_lanemask_lt": _blocks_runtime.lanemask_lt,
            "_dg_fma": cpu_fma}
RUNTIME.update({f"_dg_atomic_{op}": globals()[f"_dg_atomic_{op}"] for op in ATOMIC_OPS})
RUNTIME.update({f"_dg_{f.__name__}": f for f in _float_to_int.REPLACEMENTS.values()})
RUNTIME.update({f"_dg_{name}": fn for name, fn in _bits.FUNCTIONS.items()})
RUNTIME["_dg_power"] = _int_power.power
RUNTIME["_dg_mod"] = _remainder.remainder
#: math.floor/ceil/trunc -> the runtime name of their saturating int64 version
FLOAT_TO_INT = {m: f"_dg_{f.__name__}" for m, f in _float_to_int.REPLACEMENTS.items()}
