"""Sparsity detection through host code that only moves data (``np.stack``, ``reshape``...).

The structural tracer (:mod:`dualgpu.autodiff.sparse`) carries 64-bit dependency sets in its lanes.
Host numpy that computes with them is refused (an arithmetic rule would scale bitsets),
but a function that only moves elements, each output element a copy of one input element
or a constant, moves the dependency sets the same way, whatever their dtype: it is applied
to the values, then to each lane of the dependency sets (plain operands give empty sets).
So ``f`` may return ``np.stack([u, v])`` or ``np.concatenate(...)`` under
``sparsity="detect"`` and ``ensemble_jacobian(..., validate="detect")``.
"""
import numpy as np

from dualgpu.core.dualarray import TRACER_DTYPES, DualArray
from dualgpu.errors import DualgpuError
from dualgpu.host.operands import host

__all__ = ["MOVES_DATA", "has_tracer", "call"]

#: numpy functions whose output elements are copies of input elements (or constants).
MOVES_DATA = frozenset([
    np.stack, np.concatenate, np.hstack, np.vstack, np.column_stack, np.reshape, np.ravel,
    np.transpose, np.swapaxes, np.moveaxis, np.squeeze, np.expand_dims, np.flip, np.roll,
    np.copy, np.repeat, np.take, np.atleast_1d, np.atleast_2d, np.split, np.array_split,
])


def _walk(x, leaf):
    if isinstance(x, (list, tuple)):
        return type(x)(_walk(item, leaf) for item in x)
    return leaf(x)


def _tracers(x, found):
    if isinstance(x, DualArray):
        found.append(x)
    elif isinstance(x, (list, tuple)):
        for item in x:
            _tracers(item, found)
    return found


def has_tracer(args, kwargs):
    """True when a structural tracer is among the (nested) arguments."""
    found = _tracers(list(args) + list(kwargs.values()), [])
    return any(a.is_tracer for a in found)


def _values(x):
    return host(x.values) if isinstance(x, DualArray) else x


def _lane(lane, dtype):
    def leaf(x):
        if isinstance(x, DualArray):
            return host(x.partials)[lane]
        if isinstance(x, (float, np.floating)) or (isinstance(x, np.ndarray)
                                                    and x.dtype.kind == "f"):
            return np.zeros(np.shape(x), dtype)  # plain float data: empty sets
        return x  # axes, shapes, modes, index arrays and counts

    return leaf


def _wrap(values, lanes, dtype):
    if isinstance(values, (list, tuple)):  # np.split: one array per piece
        return type(values)(_wrap(v, [lane[k] for lane in lanes], dtype)
                            for k, v in enumerate(values))
    partials = np.stack(lanes)
    if partials.dtype != dtype or dtype not in TRACER_DTYPES or np.ndim(values) == 0:
        raise DualgpuError(
            "sparsity detection: a host function mixed the traced array with integer data "
            "(or made a 0-d result); the tracer can follow only float data through np.stack, "
            "np.concatenate and the like. Fix: give the sparsity pattern yourself, or make "
            "that data float."
        )
    return DualArray(np.asarray(values), partials)


def call(function, args, kwargs):
    """Return ``function(*args, **kwargs)`` on tracers: values and dependency sets moved alike."""
    tracers = [a for a in _tracers(list(args) + list(kwargs.values()), []) if a.is_tracer]
    lanes = {a.lanes for a in tracers}
    if len(lanes) != 1 or len(tracers) != len(_tracers(list(args) + list(kwargs.values()), [])):
        raise DualgpuError(
            f"numpy.{function.__name__} got tracers with different lane counts or tracers "
            "mixed with duals; seed them in one sparsity detection."
        )
    dtype = tracers[0].partials.dtype  # local (uint64) or global (int64) dependency sets
    values = function(*_walk(args, _values), **{k: _walk(v, _values) for k, v in kwargs.items()})
    per_lane = []
    for lane in range(lanes.pop()):
        leaf = _lane(lane, dtype)
        per_lane.append(function(*_walk(args, leaf),
                                 **{k: _walk(v, leaf) for k, v in kwargs.items()}))
    return _wrap(values, per_lane, dtype)
