"""Operands and results of host operations on duals.

Every host operation (a numpy ufunc or function applied to a :class:`~dualgpu.DualArray`
or a :class:`~dualgpu.Dual`, see :mod:`dualgpu.host.protocol`) works on pairs:

* ``values``: an ndarray of shape S (0-d for a Dual), or a Python number, and
* ``partials``: the lane-major tangents, an ndarray of shape (N, *S), or ``None`` for a
  plain operand (zero partials, never materialised).

:func:`split` turns an operand into such a pair (copying device memory to the host
first, as numba.cuda's own device arrays do under numpy), :func:`wrap` turns the answer
back into a Dual (0-d), a DualArray, or a plain array when no partials exist.
"""
import numbers

import numpy as np

from dualgpu.core._memory import host
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError

__all__ = [
    "split", "wrap", "common_lanes", "lift", "full_partials", "is_dual", "host", "registrar",
    "reject", "normalize_axes", "lane_axes", "shape_of", "ndim_of",
]


def is_dual(x):
    """True for a Dual or a DualArray."""
    return isinstance(x, (Dual, DualArray))


def split(x, what="operand"):
    """Return ``(values, partials)`` of one operand (partials None for a plain one).

    Python numbers stay Python numbers, so numpy's promotion treats them as weak (a
    float32 array times 2.5 stays float32) exactly as it does without duals.
    """
    if isinstance(x, DualArray):
        if x.is_tracer:
            raise DualgpuError(
                "host numpy operations on a structural tracer (sparsity='detect' or "
                "'detect-global') are not "
                "supported, except functions that only move data (np.stack, np.concatenate, "
                "reshape, transpose...): the detector follows kernels only. Give the sparsity "
                "pattern yourself, or return the simulation's array and post-process outside f."
            )
        return host(x.values), host(x.partials)
    if isinstance(x, Dual):
        if x.weak:  # a seeded Python float: weak in numpy's promotion, as the plain run's
            return float(x.value), x.partials
        return np.asarray(x.value), x.partials
    if isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, np.ndarray):
        return x, None
    values = np.asarray(host(x))
    if values.dtype == object:
        if any(is_dual(item) for item in values.flat):
            raise DualgpuError(
                f"a {what} is a sequence holding duals ({type(x).__name__} of Dual); numpy "
                "would keep them as Python objects. Build a DualArray from them with "
                "np.stack([d0, d1, ...]) (or dualgpu.dual_array for plain data)."
            )
        raise DualgpuError(
            f"a {what} is a {type(x).__name__} of Python objects; expected numbers, arrays, "
            "Duals or DualArrays."
        )
    return values, None


def common_lanes(partials, what):
    """Return N shared by all non-None ``partials``, or raise naming the lane counts."""
    lanes = {p.shape[0] for p in partials if p is not None}
    if len(lanes) > 1:
        raise DualgpuError(
            f"{what}: the duals have different lane counts {sorted(lanes)}; all duals in one "
            "computation must be seeded with the same N (let the driver seed them)."
        )
    return lanes.pop() if lanes else 0


def lift(partials, ndim):
    """View partials (N, *S) as (N, 1, ..., 1, *S) with ``ndim`` axes after the lane axis."""
    extra = ndim - (partials.ndim - 1)
    if extra <= 0:
        return partials
    return partials.reshape((partials.shape[0],) + (1,) * extra + partials.shape[1:])


def full_partials(partials, lanes, shape, dtype):
    """Return partials broadcast to (lanes, *shape) of ``dtype``; zeros (a view) for None."""
    full = (lanes,) + tuple(shape)
    if partials is None:
        return np.broadcast_to(np.zeros((), dtype), full)
    return np.broadcast_to(lift(partials, len(shape)), full).astype(dtype, copy=False)


def wrap(values, partials):
    """Return the result of a host operation: plain, a :class:`Dual` (0-d) or a DualArray.

    ``partials`` None (no dual operand reached the answer) or an answer that is not of
    float or complex kind (an index, a bool) gives the plain ``values``.
    """
    values = np.asarray(values)
    if partials is None or values.dtype.kind not in "fc":
        return values[()] if values.ndim == 0 else values
    if partials.dtype != values.dtype:
        partials = partials.astype(values.dtype)
    if values.ndim == 0:
        return Dual(values[()], partials.reshape(-1), dtype=values.dtype)
    if not partials.flags.writeable:
        partials = np.array(partials)  # broadcast views: give the caller its own memory
    return DualArray(values, partials)


def registrar(table):
    """Return a decorator that records an implementation in ``table`` for numpy functions."""

    def implements(*functions):
        def register(impl):
            for function in functions:
                if function is not None:  # a numpy function this numpy version lacks
                    table[function] = impl
            return impl

        return register

    return implements


def reject(fname, unsupported, **given):
    """Raise unless every keyword in ``unsupported`` is absent and each ``given`` is unset.

    ``unsupported`` is the ``**kwargs`` an implementation did not name; ``given`` are
    named keywords it accepts only unset (``out=None``, ``where=True``).
    """
    bad = sorted(unsupported)
    bad += [k for k, v in given.items() if v is not None and v is not True]
    if bad:
        raise DualgpuError(
            f"{fname} on duals: keyword(s) {bad} are not supported. Fix: call it without "
            "them (for out=, assign the result: out[...] = result), or call it on the values "
            "(u.values) if no derivative is wanted."
        )


def normalize_axes(axis, ndim, fname):
    """Return ``axis`` as a tuple of non-negative ints (None stays None)."""
    if axis is None:
        return None
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = []
    for a in items:
        integer = isinstance(a, (int, np.integer)) and not isinstance(a, bool)
        if not integer or not -ndim <= a < max(ndim, 1):
            raise np.exceptions.AxisError(
                f"{fname}: axis {a!r} is out of bounds for an array of dimension {ndim}")
        axes.append(int(a) % max(ndim, 1))
    if len(set(axes)) != len(axes):
        raise DualgpuError(f"{fname}: axis {axis!r} repeats an axis.")
    return tuple(axes)


def lane_axes(axes):
    """The partials' axes for the values' ``axes`` (the lane axis comes first)."""
    return tuple(a + 1 for a in axes)


def shape_of(x):
    """The shape of an operand (Dual: ``()``), without going through numpy's dispatch."""
    if is_dual(x):
        return tuple(x.shape) if isinstance(x, DualArray) else ()
    return tuple(np.shape(x))


def ndim_of(x):
    return len(shape_of(x))
