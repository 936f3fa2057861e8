"""Copies into existing arrays: ``cuda.to_device(x, to=buffer)`` and ``buffer.copy_to_device(x)``.

Either side may be a :class:`~dualgpu.DualArray` or a plain array, in host or device
memory, on any backend:

* into a DualArray from a DualArray: values and partials are copied (same shape and
  lane count);
* into a DualArray from a plain array: the values are copied and the partials set to
  zero (a plain array carries no tangent);
* into a plain array from a DualArray: refused, since the partials would be lost;
* plain into plain: the array's own ``copy_to_device`` (or an assignment for numpy).

The copy is :class:`~dualgpu.DualArray`'s own behaviour (its ``copy_to_device``), so
:func:`copy_into` lives in :mod:`dualgpu.core.dualarray`; this module keeps its old name.
"""
from dualgpu.core.dualarray import copy_into

__all__ = ["copy_into"]
