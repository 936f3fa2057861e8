"""Advanced indexing of host DualArrays: masks and index arrays (``u[mask]``, ``u[[0, 2]]``).

Basic indices (ints, slices, ``...``, ``None``) are views, handled by
:class:`~dualgpu.DualArray` itself with the lane axis kept first. With index arrays numpy
may move the indexed axes to the front (``a[idx, :, idx]``), which would move them in
front of the lane axis too; here the partials are indexed with the lane axis moved last,
where no index reaches it, and moved back.
"""
import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.host.operands import host, is_dual, wrap

__all__ = ["getitem", "store_advanced", "lanes_last_key"]


def lanes_last_key(index):
    """``index`` for an array whose lane axis was moved last (an explicit ``:`` after ``...``)."""
    for item in index:
        if is_dual(item):
            raise DualgpuError(
                f"a DualArray index holds a {type(item).__name__}; expected ints, slices, "
                "masks or integer arrays. Fix: index with values (u.values > 0, "
                "np.argsort(u.values))."
            )
    if any(item is Ellipsis for item in index):
        return index + (slice(None),)
    return index


def getitem(array, index):
    """Return ``array[index]`` for an index with arrays, lists or bools (a copy)."""
    key = lanes_last_key(index)
    values = host(array.values)
    partials = host(array.partials)
    result = values[index]
    picked = np.moveaxis(partials, 0, -1)[key]
    return wrap(result, np.ascontiguousarray(np.moveaxis(picked, -1, 0)))


def store_advanced(array, index, values, partials):
    """Store ``values`` (and ``partials``, None for zero) at an advanced ``index``."""
    if array.is_device:
        raise DualgpuError(
            "stores through masks or index arrays need a host DualArray (device arrays take "
            "slices only). Fix: copy it with .copy_to_host(), store, and copy back."
        )
    key = lanes_last_key(index)
    array.values[index] = values
    moved = np.moveaxis(array.partials, 0, -1)
    moved[key] = 0 if partials is None else np.moveaxis(host(partials), 0, -1)
