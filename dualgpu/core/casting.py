"""Casts that keep the partials: ``dualgpu.float32(p)``, ``dualgpu.astype(x, dtype)``.

``np.float32(p)`` cannot work on a :class:`~dualgpu.Dual`: numpy converts its argument
with ``float()``, which would drop the partials, so a Dual refuses it (a ``TypeError``
that names the alternative). Host code of float32 simulations casts its parameters
with ``dualgpu.float32(p)`` instead: it is ``np.float32(p)`` for plain numbers and
arrays, and keeps the lanes of Duals and DualArrays, so the same line runs with and
without the driver.
"""
from __future__ import annotations

from typing import Any
import numpy.typing as npt

import numbers

import numpy as np

from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.core.object_arrays import from_object_array

__all__ = ["astype", "float32", "float64", "astype_dual_array"]


def astype(x: Any, dtype: npt.DTypeLike) -> Any:
    """Return ``x`` cast to ``dtype``, keeping its partials when it is a dual.

    Parameters
    ----------
    x : number, numpy scalar, array_like, Dual or DualArray
        A list, tuple (nested too) or numpy object array that holds Duals gives a
        DualArray, as ``np.stack`` of its elements.
    dtype : numpy dtype
        A float dtype keeps the partials of a dual (float32 or float64); an integer or
        bool dtype gives the plain values (zero derivative).

    Returns
    -------
    Dual, DualArray, numpy scalar or ndarray
        Duals stay duals; a plain number becomes a numpy scalar, an array an array.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> p = dualgpu.Dual(0.7, [1.0, 0.0])
    >>> q = dualgpu.astype(p, np.float32)
    >>> q.dtype, q.partials.tolist()
    (dtype('float32'), [1.0, 0.0])
    >>> dualgpu.astype(0.7, np.float32)
    np.float32(0.7)
    >>> u = dualgpu.astype([p, 2.0], np.float32)  # a list of duals: a DualArray
    >>> u.dtype, u.partials.tolist()
    (dtype('float32'), [[1.0, 0.0], [0.0, 0.0]])
    >>> dualgpu.astype(np.array([p, 2.0], dtype=object), np.float32).partials.tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    if isinstance(x, (Dual, DualArray)):
        return x.astype(dtype)
    dtype = np.dtype(dtype)
    if isinstance(x, np.ndarray) and x.dtype == object:  # np.array([dual, ...]): each dual
        return _cast_sequence(x, dtype)
    if isinstance(x, np.ndarray):
        return x.astype(dtype)
    if isinstance(x, (numbers.Number, np.generic)):
        return dtype.type(x)  # type: ignore[call-overload]
    if isinstance(x, (list, tuple)):
        return _cast_sequence(x, dtype)
    return np.asarray(x).astype(dtype)


def _cast_sequence(items, dtype):
    """A list, tuple (nested too) or object array: a DualArray when it holds duals, else numpy's.
    """
    array = items if isinstance(items, np.ndarray) else np.array(items, dtype=object)
    if not any(isinstance(item, Dual) for item in array.reshape(-1)):
        return np.asarray(items).astype(dtype)
    what = ("the object array" if isinstance(items, np.ndarray)
            else f"the {type(items).__name__}")
    stacked = from_object_array(array, f"{what} given to dualgpu.astype")
    return stacked.astype(dtype)


def float32(x: Any) -> Any:
    """Return ``x`` as float32: ``np.float32(x)`` that keeps a dual's partials.

    Parameters
    ----------
    x : number, Dual, array_like or DualArray
        What to cast.

    Returns
    -------
    numpy.float32, ndarray, Dual or DualArray
        ``np.float32(x)`` for plain numbers and arrays; a float32 dual (array) with the
        partials cast too.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> dualgpu.float32(dualgpu.Dual(0.5, [1.0])).dtype
    dtype('float32')
    >>> type(dualgpu.float32(0.5)) is np.float32
    True
    """
    return astype(x, np.float32)


def float64(x: Any) -> Any:
    """Return ``x`` as float64: ``np.float64(x)`` that keeps a dual's partials.

    Parameters
    ----------
    x : number, Dual, array_like or DualArray
        What to cast.

    Returns
    -------
    numpy.float64, ndarray, Dual or DualArray
        ``np.float64(x)`` for plain numbers and arrays; a float64 dual (array) with the
        partials cast too.

    Examples
    --------
    >>> import numpy as np, dualgpu
    >>> d = dualgpu.float64(dualgpu.Dual(np.float32(0.5), [1.0]))
    >>> d.dtype, d.partials.tolist()
    (dtype('float64'), [1.0])
    """
    return astype(x, np.float64)


def astype_dual_array(array, dtype, copy=True):
    """Return DualArray ``array`` cast to ``dtype`` on its side (see :meth:`DualArray.astype`)."""
    return array.astype(dtype, copy)
