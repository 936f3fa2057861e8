"""numba types of Python duals and dual arrays: the ``typeof`` of :class:`~dualgpu.Dual` and
:class:`~dualgpu.DualArray` (CPU and CUDA alike).

One registration per Python class, first order and tagged (second order) alike: a value
with a tag above 0, or nested members, gets a ``TaggedDualType`` / ``TaggedDualArrayType``,
any other a ``DualType`` / ``DualArrayType`` (all in :mod:`dualgpu.compiled.types`).
A DualArray passed to a plain ``numba.cuda`` kernel (one not ported to dualgpu) is
refused here, with the fix.
"""
import sys

import numpy as np
from numba import types
from numba.core.extending import typeof_impl
from numba.np import numpy_support
from numba.core.typing.typeof import typeof

from dualgpu.compiled.types import (
    DualArrayType, TaggedDualArrayType, complex_dual_type, dual_type, tagged_type, type_mode,
)
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import UnportedKernelError

__all__ = ["typeof_dual", "typeof_dual_array"]


@typeof_impl.register(Dual)
def typeof_dual(val, c):
    """numba type of a Python :class:`~dualgpu.Dual` (a tagged one included)."""
    if not val.tag:
        dtype = val.dtype
        if dtype == np.float32:
            return dual_type(types.float32, val.lanes)
        if dtype.kind == "c":
            return complex_dual_type(numpy_support.from_dtype(dtype), val.lanes)
        return dual_type(types.float64, val.lanes)
    if isinstance(val.value, Dual):  # nested: a dual of duals
        value_type = typeof(val.value, c)
    else:
        value_type = types.float32 if val.dtype == np.float32 else types.float64
    return tagged_type(value_type, val.lanes, val.tag)


@typeof_impl.register(DualArray)
def typeof_dual_array(val, c):
    """numba type of a Python :class:`~dualgpu.DualArray` (a tagged or nested one included).

    Kernels are launched thousands of times with the same arrays: the type is computed once
    and kept on the array, for as long as its members stay the same arrays.
    """
    cache = val._numba_type_cache
    mode = type_mode()  # a rule defined since: typed anew (dualgpu.compiled.types.type_mode)
    if cache is not None and cache[0] is val.values and cache[1] is val.partials and (
            cache[2].mode is mode):
        return cache[2]
    if val.tag:
        ty = TaggedDualArrayType(typeof(val.values, c), typeof(val.partials, c), val.lanes,
                                 val.tag)
    else:
        _refuse_unported_kernel()  # only on first typing: launches stay cheap
        ty = DualArrayType(typeof(val.values, c), typeof(val.partials, c), val.lanes)
    val._numba_type_cache = (val.values, val.partials, ty)
    return ty


def _unported_cuda_kernel():
    """The plain numba.cuda dispatcher typing this argument for a launch, or None.

    A kernel compiled by ``from numba import cuda`` cannot take duals (and, without a GPU,
    fails with numba's driver error): the user has to port it. dualgpu's own GPU kernels
    carry the ``DualArguments`` extension and pass.
    """
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        if frame.f_code.co_name == "typeof_pyval":
            owner = frame.f_locals.get("self")
            if not type(owner).__module__.startswith("numba.cuda"):
                return None
            extensions = (getattr(owner, "targetoptions", None) or {}).get("extensions") or ()
            ported = any(type(e).__name__ == "DualArguments" for e in extensions)
            return None if ported else owner
        frame = frame.f_back
    return None


def _refuse_unported_kernel():
    owner = _unported_cuda_kernel()
    if owner is None:
        return
    name = getattr(getattr(owner, "py_func", None), "__name__", "the kernel")
    raise UnportedKernelError(
        f"kernel {name!r} is a plain numba.cuda kernel and was given a DualArray; numba.cuda "
        "cannot launch it with dual arguments (and needs a GPU). Port it: in its module change "
        "'from numba import cuda' to 'from dualgpu import cuda', or wrap it: "
        f"dualgpu.jit({name}). Ported kernels run on the 'cuda', 'cpu' and 'cudasim' backends."
    )
