"""Copies into existing arrays: ``cuda.to_device(x, to=buffer)`` and ``buffer.copy_to_device(x)``.

Either side may be a :class:`~dualgpu.DualArray` or a plain array, in host or device
memory, on any backend:

* into a DualArray from a DualArray: values and partials are copied (same shape and
  lane count);
* into a DualArray from a plain array: the values are copied and the partials set to
  zero (a plain array carries no tangent);
* into a plain array from a DualArray: refused, since the partials would be lost;
* plain into plain: the array's own ``copy_to_device`` (or an assignment for numpy).
"""
import numpy as np

from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.core.object_arrays import from_object_array, is_object_array

__all__ = ["copy_into"]


def _is_device(array):
    return hasattr(array, "copy_to_host") and not isinstance(array, np.ndarray)


def _host_copy(array, dtype):
    if _is_device(array):
        array = array.copy_to_host()
    return np.ascontiguousarray(array, dtype=dtype)


def _copy_member(dest, src, what):
    """Copy ``src`` (host or device array) into ``dest`` (host or device array) in place."""
    if tuple(np.shape(src)) != tuple(dest.shape):
        raise DualgpuError(
            f"copy into an array of shape {tuple(dest.shape)}: the {what} have shape "
            f"{tuple(np.shape(src))}. Copy arrays of the same shape (allocate the buffer with "
            "cuda.device_array_like(x))."
        )
    if _is_device(dest):
        if _is_device(src) and src.dtype == dest.dtype:
            dest.copy_to_device(src)
        else:
            dest.copy_to_device(_host_copy(src, dest.dtype))
    else:
        np.copyto(np.asarray(dest), _host_copy(src, dest.dtype))


def _zero(dest):
    if _is_device(dest):
        dest.copy_to_device(np.zeros(dest.shape, dest.dtype))
    else:
        np.asarray(dest)[...] = 0


def copy_into(dest, src, stream=0):
    """Copy ``src`` into ``dest`` in place (see the module docstring); return ``dest``."""
    if is_object_array(src):  # np.array([dual, 0.0]) in host code
        src = from_object_array(src, "the array copied into a buffer")
    if isinstance(dest, DualArray):
        if isinstance(src, DualArray):
            if src.lanes != dest.lanes:
                raise DualgpuError(
                    f"copy into a DualArray with {dest.lanes} lane(s) from one with "
                    f"{src.lanes}: allocate the buffer like the source "
                    "(cuda.device_array_like(x)) so that the lane counts agree."
                )
            _copy_member(dest.values, src.values, "values")
            _copy_member(dest.partials, src.partials, "partials")
        else:
            _copy_member(dest.values, src, "values")
            _zero(dest.partials)
        return dest
    if isinstance(src, DualArray):
        raise DualgpuError(
            f"copy of a DualArray ({src.lanes} lane(s)) into a plain {type(dest).__name__} "
            "would drop its partials. Allocate the buffer through dualgpu.cuda "
            "(device_array_like(x), or device_array under the driver), which makes it a "
            "DualArray, or copy x.values if no derivative is wanted."
        )
    if _is_device(dest):
        dest.copy_to_device(src, stream=stream)
    else:
        _copy_member(dest, src, "values")
    return dest
