"""numpy object arrays that hold duals: what ``np.array([dual, 0.0])`` makes in host code.

Host code written for floats builds small arrays from scalars (``np.array([np.sum(u) * 1.1,
0.0])``, ``np.asarray([e_kin, e_pot])``). Under the driver those scalars are
:class:`~dualgpu.Dual` numbers, and numpy, which cannot see inside them, makes an array of
dtype object. Such an array reaching a kernel, ``cuda.to_device`` or the driver's result
is turned here into the :class:`~dualgpu.DualArray` the plain code meant (a float array when
it holds numbers only), exactly as ``np.stack`` of the same scalars gives.
"""
import numbers

import numpy as np

from dualgpu.core.dual import Dual
from dualgpu.errors import DualgpuError

__all__ = ["from_object_array", "is_object_array", "write_back"]


def is_object_array(obj):
    """True for a numpy array of dtype object (on the host)."""
    return isinstance(obj, np.ndarray) and obj.dtype == object


def from_object_array(array, what="an array"):
    """Return the DualArray (or float array) an object array of duals and numbers stands for.

    Raises
    ------
    DualgpuError
        If an element is neither a Dual nor a real number, or if it is empty.
    """
    items = list(array.reshape(-1))
    for item in items:
        if not isinstance(item, (Dual, numbers.Real)) or isinstance(item, bool):
            raise DualgpuError(
                f"{what} is a numpy array of dtype object holding {type(item).__name__}; "
                "expected Duals and numbers (as np.array([dual, 0.0]) makes under the "
                "driver). Build it from numbers and duals only, or with np.stack."
            )
    if not items:
        raise DualgpuError(
            f"{what} is an empty numpy array of dtype object; give it a float dtype "
            "(np.zeros(0)) instead."
        )
    stacked = np.stack(items)
    return stacked.reshape(array.shape) if array.ndim != 1 else stacked


def write_back(array, converted):
    """Store the elements of ``converted`` (after a kernel wrote it) into the object array."""
    for index in np.ndindex(array.shape):
        array[index] = converted[index]
