"""Reductions, scans and statistics of host duals.

Hand-written (they cannot come from the elementwise rule table: each answer depends on
many elements). Each one computes the values with numpy's own function (the same
answer, bit for bit) and the lane-major partials (N, *S) with the same reduction over
the same axes shifted by one, since the lane axis comes first. ``axis=None`` reduces
over all the values' axes, never over the lanes.

Conventions
-----------
* ``max``/``min`` (``np.max``, ``u.max()``, ``np.amax``...) take the partials of the element
  the answer came from: on ties the first one, as ``np.argmax`` picks it; when a NaN makes
  the answer NaN, the first NaN's partials (numpy propagates NaN, so do the partials).
* ``prod`` gives exact partials when elements are zero: the product of the *other*
  elements, from prefix and suffix products (never ``ans / x``).
* ``var``, ``std``, ``average`` and ``trapezoid`` are numpy's own formulas written with the
  operations above, so their derivatives follow from the rules (``std`` of constant data
  has the infinite ``sqrt(0)`` factor, as in the rule table).
"""
import math

import numpy as np

from dualgpu.host.operands import (
    lane_axes, ndim_of, normalize_axes, registrar, reject, shape_of, split, wrap,
)

__all__ = ["FUNCTIONS", "UFUNC_REDUCE", "UFUNC_ACCUMULATE"]

#: numpy function -> implementation, read by :mod:`dualgpu.host.protocol`.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)


def _reduce_lanes(partials, axes, ndim, keepdims, reduce, dtype=None):
    """Reduce partials (N, *S) over the values' ``axes`` (None: all of them)."""
    lanes = partials.shape[0]
    if axes is None:
        reduced = reduce(partials.reshape(lanes, -1), axis=1, dtype=dtype)
        return reduced.reshape((lanes,) + (1,) * ndim) if keepdims else reduced
    return reduce(partials, axis=lane_axes(axes), keepdims=keepdims, dtype=dtype)


def _merged(values, partials, axes):
    """Move the reduced ``axes`` last and merge them: values (*R, m), partials (N, *R, m)."""
    lanes = partials.shape[0]
    if axes is None:
        return values.reshape(-1), partials.reshape(lanes, -1)
    k = len(axes)
    x = np.moveaxis(values, axes, range(-k, 0))
    p = np.moveaxis(partials, lane_axes(axes), range(-k, 0))
    rest = x.shape[: x.ndim - k]
    return x.reshape(rest + (-1,)), p.reshape((lanes,) + rest + (-1,))


def _output_shape(shape, axes, keepdims):
    if axes is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _count(shape, axes):
    return math.prod(shape) if axes is None else math.prod(shape[a] for a in axes)


# ---------------------------------------------------------------------------
# sums
# ---------------------------------------------------------------------------
@implements(np.sum)
def sum_(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True,
         **unsupported):
    """Return the sum over ``axis``: a Dual for a full reduction, else a DualArray."""
    reject("numpy.sum", unsupported, out=out, where=where)
    values, partials = split(a)
    values = np.asarray(values)
    axes = normalize_axes(axis, values.ndim, "numpy.sum")
    extra = {} if initial is None else {"initial": initial}
    total = np.sum(values, axis=axis, dtype=dtype, keepdims=keepdims, **extra)
    if partials is None:
        return wrap(total, None)
    dtype = np.result_type(total)
    return wrap(total, _reduce_lanes(partials, axes, values.ndim, keepdims, np.sum, dtype))


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=True, **unsupported):
    """Return the mean over ``axis`` (the partials' mean over the same cells)."""
    reject("numpy.mean", unsupported, out=out, where=where)
    values, partials = split(a)
    values = np.asarray(values)
    axes = normalize_axes(axis, values.ndim, "numpy.mean")
    result = np.mean(values, axis=axis, dtype=dtype, keepdims=keepdims)
    if partials is None:
        return wrap(result, None)
    dtype = np.result_type(result)
    total = _reduce_lanes(partials, axes, values.ndim, keepdims, np.sum, dtype)
    count = _count(values.shape, axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return wrap(result, np.true_divide(total, count, dtype=dtype))


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None, **unsupported):
    """Return the running sum along ``axis`` (of the flattened array when None)."""
    reject("numpy.cumsum", unsupported, out=out)
    values, partials = split(a)
    values = np.asarray(values)
    result = np.cumsum(values, axis=axis, dtype=dtype)
    if partials is None:
        return wrap(result, None)
    dtype = result.dtype
    if axis is None:
        return wrap(result, np.cumsum(partials.reshape(partials.shape[0], -1), axis=1,
                                      dtype=dtype))
    (ax,) = normalize_axes(axis, values.ndim, "numpy.cumsum")
    return wrap(result, np.cumsum(partials, axis=ax + 1, dtype=dtype))


# ---------------------------------------------------------------------------
# products
# ---------------------------------------------------------------------------
def _products_of_others(x):
    """Along the last axis, the product of every element but the one at each position."""
    ones = np.ones(x.shape[:-1] + (1,), x.dtype)
    left = np.concatenate([ones, np.cumprod(x[..., :-1], axis=-1)], axis=-1)
    right = np.concatenate([np.cumprod(x[..., :0:-1], axis=-1)[..., ::-1], ones], axis=-1)
    return left * right


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True,
         **unsupported):
    """Return the product over ``axis``; exact partials when elements are zero."""
    reject("numpy.prod", unsupported, out=out, where=where)
    values, partials = split(a)
    values = np.asarray(values)
    axes = normalize_axes(axis, values.ndim, "numpy.prod")
    extra = {} if initial is None else {"initial": initial}
    result = np.prod(values, axis=axis, dtype=dtype, keepdims=keepdims, **extra)
    if partials is None:
        return wrap(result, None)
    dtype = np.result_type(result)
    x, p = _merged(values.astype(dtype, copy=False), partials, axes)
    others = _products_of_others(x)
    if initial is not None:
        others = others * dtype.type(initial)
    d = np.sum(others * p, axis=-1, dtype=dtype)
    shape = _output_shape(values.shape, axes, keepdims)
    return wrap(result, d.reshape((partials.shape[0],) + shape))


# ---------------------------------------------------------------------------
# extrema
# ---------------------------------------------------------------------------
def _extremum(fname, pick, argpick, a, axis, keepdims):
    values, partials = split(a)
    values = np.asarray(values)
    axes = normalize_axes(axis, values.ndim, fname)
    result = pick(values, axis=axis, keepdims=keepdims)
    if partials is None:
        return wrap(result, None)
    lanes = partials.shape[0]
    if axes is None:
        d = partials.reshape(lanes, -1)[:, argpick(values.reshape(-1))]
        if keepdims:
            d = d.reshape((lanes,) + (1,) * values.ndim)
    elif len(axes) == 1:
        (ax,) = axes
        index = argpick(values, axis=ax, keepdims=True)
        d = np.take_along_axis(partials, index[None], axis=ax + 1)
        if not keepdims:
            d = d.reshape((lanes,) + result.shape)
    else:
        x, p = _merged(values, partials, axes)
        index = argpick(x, axis=-1)
        d = np.take_along_axis(p, index[None, ..., None], axis=-1)[..., 0]
        d = d.reshape((lanes,) + _output_shape(values.shape, axes, keepdims))
    return wrap(result, d)


@implements(np.max, getattr(np, "amax", None))
def max_(a, axis=None, out=None, keepdims=False, initial=None, where=True, **unsupported):
    """Return the maximum over ``axis``, with the partials of the element it came from."""
    reject("numpy.max", unsupported, out=out, initial=initial, where=where)
    return _extremum("numpy.max", np.max, np.argmax, a, axis, keepdims)


@implements(np.min, getattr(np, "amin", None))
def min_(a, axis=None, out=None, keepdims=False, initial=None, where=True, **unsupported):
    """Return the minimum over ``axis``, with the partials of the element it came from."""
    reject("numpy.min", unsupported, out=out, initial=initial, where=where)
    return _extremum("numpy.min", np.min, np.argmin, a, axis, keepdims)


# ---------------------------------------------------------------------------
# statistics: numpy's formulas, differentiated through the operations above
# ---------------------------------------------------------------------------
@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=None, correction=None, **unsupported):
    """Return the variance over ``axis`` (numpy's two-pass formula, on duals)."""
    reject("numpy.var", unsupported, out=out, where=where, mean=mean)
    if correction is not None:
        ddof = correction
    shape = shape_of(a)
    axes = normalize_axes(axis, len(shape), "numpy.var")
    count = _count(shape, axes)
    centre = np.sum(a, axis=axis, dtype=dtype, keepdims=True) / count
    x = a - centre
    # numpy's variance of complex numbers is the mean of |x|^2 (real): x * conj(x), real part
    x = np.real(x * np.conjugate(x)) if np.iscomplexobj(x) else x * x
    total = np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / max(count - ddof, 0)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=None, correction=None, **unsupported):
    """Return the standard deviation over ``axis``: ``sqrt(var)``."""
    reject("numpy.std", unsupported, out=out, where=where, mean=mean)
    return np.sqrt(var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                       correction=correction))


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False, **unsupported):
    """Return the (weighted) average over ``axis``; the weights may be duals too."""
    reject("numpy.average", unsupported)
    shape = shape_of(a)
    kw = {"keepdims": keepdims} if keepdims else {}
    if weights is None:
        avg = np.mean(a, axis=axis, **kw)
        scale = _count(shape, normalize_axes(axis, len(shape), "numpy.average"))
        scale = np.result_type(avg).type(scale)
    else:
        w_shape = shape_of(weights)
        a_dtype = np.result_type(split(a)[0])
        w_dtype = np.result_type(split(weights)[0])
        if a_dtype.kind in "iub":
            dtype = np.result_type(a_dtype, w_dtype, "f8")
        else:
            dtype = np.result_type(a_dtype, w_dtype)
        if w_shape != shape:
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            axes = normalize_axes(axis, len(shape), "numpy.average")
            if w_shape != tuple(shape[ax] for ax in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            weights = np.transpose(weights, np.argsort(axes))
            weights = np.reshape(weights, tuple(s if ax in axes else 1
                                                for ax, s in enumerate(shape)))
        scale = np.sum(weights, axis=axis, dtype=dtype, **kw)
        if np.any(split(scale)[0] == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(np.multiply(a, weights, dtype=dtype), axis=axis, **kw) / scale
    if returned:
        if shape_of(scale) != shape_of(avg):
            scale = np.broadcast_to(scale, shape_of(avg))
        return avg, scale
    return avg


def _trapezoid(y, x=None, dx=1.0, axis=-1, **unsupported):
    """Return the integral of ``y`` along ``axis`` by the trapezoidal rule (y, x may be duals)."""
    reject("numpy.trapezoid", unsupported)
    nd = ndim_of(y)
    if x is None:
        d = dx
    elif ndim_of(x) == 1:
        d = np.diff(x)
        shape = [1] * nd
        shape[axis] = shape_of(d)[0]
        d = np.reshape(d, shape)
    else:
        d = np.diff(x, axis=axis)
    upper = [slice(None)] * nd
    lower = [slice(None)] * nd
    upper[axis] = slice(1, None)
    lower[axis] = slice(None, -1)
    return np.add.reduce(d * (y[tuple(upper)] + y[tuple(lower)]) / 2.0, axis)


implements(getattr(np, "trapezoid", None), getattr(np, "trapz", None))(_trapezoid)


# ---------------------------------------------------------------------------
# ufunc methods that are these reductions
# ---------------------------------------------------------------------------
def _reduce_method(impl):
    def reduce(array, axis=0, dtype=None, out=None, keepdims=False, **kwargs):
        if dtype is not None:
            kwargs["dtype"] = dtype
        return impl(array, axis=axis, out=out, keepdims=keepdims, **kwargs)

    return reduce


#: ``ufunc.reduce`` on duals: np.add.reduce is a sum, np.maximum.reduce a max...
UFUNC_REDUCE = {
    "add": _reduce_method(sum_),
    "multiply": _reduce_method(prod),
    "maximum": _reduce_method(max_),
    "minimum": _reduce_method(min_),
}

#: ``ufunc.accumulate`` on duals.
UFUNC_ACCUMULATE = {
    "add": lambda array, axis=0, dtype=None, out=None: cumsum(array, axis=axis, dtype=dtype,
                                                             out=out),
}
