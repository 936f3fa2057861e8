"""Private copies of a function's arguments, so that ``f`` cannot change the caller's data.

Every driver path (:func:`dualgpu.jvp`, :func:`~dualgpu.jvp_batch`,
:func:`~dualgpu.jacobian` dense and sparse, :func:`~dualgpu.jacfwd`,
sparsity detection and the finite-difference checkers in
:mod:`dualgpu.testing`) runs ``f`` several times on the same arguments. A
function that updates an argument in place (``w += 1.0``) would otherwise run
each chunk on different data (a wrong Jacobian) and change the caller's array.
So every run gets fresh copies of every array reachable from its arguments.
"""
import copy as _copy

import numpy as np

from dualgpu.core._memory import is_simulated
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray

__all__ = ["protect", "protect_call"]


def _is_device(value):
    # numba.cuda device arrays and the simulator's stand-ins (HostArray is an ndarray)
    return hasattr(value, "copy_to_host") and not isinstance(value, (np.ndarray, DualArray))


def _copy_device(array):
    """A new device array (on the same kind of device) holding a copy of ``array``."""
    host = array.copy_to_host()
    if is_simulated(array):
        from numba.cuda import simulator

        return simulator.to_device(host)
    from numba import cuda

    out = cuda.device_array_like(array)
    out.copy_to_device(array)
    return out


def _copy_member(array):
    return _copy_device(array) if _is_device(array) else array.copy()


def protect(value, _memo=None):
    """Return ``value`` with every array reachable from it replaced by a copy.

    numpy arrays (subclasses kept, e.g. the cpu backend's ``HostArray``),
    device arrays (numba.cuda and the simulator's), :class:`~dualgpu.DualArray`
    (both members) and :class:`~dualgpu.Dual` are copied; tuples (named tuples
    too), lists and dicts are rebuilt around the copies, to any depth. Anything
    else (numbers, strings, other objects) is passed as it is: arrays held as
    attributes of other objects are not reached.

    Examples
    --------
    >>> import numpy as np
    >>> from dualgpu.autodiff._protect import protect
    >>> w = np.zeros(2)
    >>> args = protect((w, {"scale": [w, 1.0]}))
    >>> args[0] is w, args[1]["scale"][0] is w, args[1]["scale"][1]
    (False, False, 1.0)
    """
    memo = {} if _memo is None else _memo
    key = id(value)
    if key in memo:
        return memo[key]
    if isinstance(value, np.ndarray):
        out = value.copy()
    elif isinstance(value, DualArray):
        out = DualArray(_copy_member(value.values), _copy_member(value.partials))
    elif isinstance(value, Dual):
        out = Dual(value.value, value.partials, dtype=value.dtype)
    elif _is_device(value):
        out = _copy_device(value)
    elif isinstance(value, tuple):
        items = [protect(v, memo) for v in value]
        out = type(value)._make(items) if hasattr(value, "_make") else type(value)(items)
    elif isinstance(value, list):
        out = _copy.copy(value)
        memo[key] = out  # before the items: a list may hold itself
        out[:] = [protect(v, memo) for v in value]
        return out
    elif isinstance(value, dict):
        out = _copy.copy(value)
        memo[key] = out
        for k, v in value.items():
            out[k] = protect(v, memo)
        return out
    else:
        return value
    memo[key] = out
    return out


def protect_call(args, kwargs):
    """Return ``(args, kwargs)`` copied by :func:`protect` (one memo: shared arrays stay shared)."""
    memo = {}
    return tuple(protect(a, memo) for a in args), {k: protect(v, memo) for k, v in kwargs.items()}
