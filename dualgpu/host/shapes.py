"""Shape, joining, selection and creation functions of host duals.

Hand-written: these move or pick elements rather than compute them, so no derivative
rule applies. Each does to the lane-major partials (N, *S) what it does to the values,
on the axes shifted by one (the lane axis comes first and never moves); plain operands
joined with duals contribute zero partials. Creation functions (``np.zeros_like(u)``...)
give a dual array with zero partials and the template's lanes, on the template's side
(host or device).
"""
import numpy as np

from dualgpu.core import hooks
from dualgpu.core._memory import is_device, same_side
from dualgpu.core.dual import DECISIONS, Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError
from dualgpu.host import buffers as host_buffers
from dualgpu.host.operands import (
    common_lanes, full_partials, host, is_dual, lane_axes, lift, ndim_of, normalize_axes,
    registrar, reject, shape_of, split, wrap,
)

__all__ = ["FUNCTIONS", "reshape", "same_side"]

#: numpy function -> implementation, read by :mod:`dualgpu.host.protocol`.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)


def _pair(a, fname):
    values, partials = split(a, f"{fname} operand")
    return np.asarray(values), partials


# ---------------------------------------------------------------------------
# shape
# ---------------------------------------------------------------------------
def _on_device(a):
    """A DualArray of device arrays: reshaped and permuted by the arrays' own methods (views
    on the simulator, as for numba.cuda's plain arrays; see :func:`_device_permuted`)."""
    return isinstance(a, DualArray) and is_device(a.values)


def _device_permuted(a, order):
    """Device DualArray ``a`` with its axes in ``order`` (normalised; None reverses them),
    permuted as numba.cuda permutes its arrays. The simulator's arrays give views (a kernel
    writing into ``out.T`` writes into ``out``, as in the plain run), a GPU's DeviceNDArray
    a copy of a 2-D array (and the partials, of one more dimension, a copy too). Host numpy
    would copy both to the host and lose the writes."""
    order = tuple(reversed(range(a.ndim))) if order is None else tuple(order)
    values = a.values.transpose(order)
    lane_order = (0,) + lane_axes(order)
    try:
        partials = a.partials.transpose(lane_order)
    except NotImplementedError:  # numba's DeviceNDArray transposes 2-D arrays only
        partials = same_side(a.partials, np.ascontiguousarray(
            np.transpose(a.partials.copy_to_host(), lane_order)))
    return DualArray(values, partials)


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """Return ``a`` with a new shape (orders 'C' and 'F')."""
    shape = newshape if shape is None else shape
    if _on_device(a) and order == "C" and copy is None:
        # the device arrays' own reshape: a view on the simulator, as for plain device
        # arrays (a kernel writing into out.reshape(...) writes into out)
        values = a.values.reshape(shape)
        return DualArray(values, a.partials.reshape((a.partials.shape[0],) + values.shape))
    values, partials = _pair(a, "numpy.reshape")
    result = np.reshape(values, shape, order=order, copy=copy)
    if partials is None:
        return wrap(result, None)
    lanes = partials.shape[0]
    if order == "C":
        return wrap(result, np.reshape(partials, (lanes,) + result.shape, copy=copy))
    if order == "F":  # lanes last: each lane is one contiguous block in Fortran order
        moved = np.moveaxis(partials, 0, -1).reshape(result.shape + (lanes,), order="F")
        return wrap(result, np.moveaxis(moved, -1, 0))
    raise DualgpuError(f"numpy.reshape on duals: order must be 'C' or 'F'; got {order!r}.")


@implements(np.ravel)
def ravel(a, order="C"):
    """Return the flattened array."""
    return reshape(a, (-1,), order=order)


@implements(np.transpose)
def transpose(a, axes=None):
    """Return ``a`` with its axes permuted (reversed by default)."""
    if _on_device(a):
        return _device_permuted(a,
            None if axes is None else normalize_axes(tuple(axes), a.ndim, "numpy.transpose"))
    values, partials = _pair(a, "numpy.transpose")
    result = np.transpose(values, axes)
    if partials is None:
        return wrap(result, None)
    if axes is None:
        order = tuple(range(values.ndim - 1, -1, -1))
    else:
        order = normalize_axes(tuple(axes), values.ndim, "numpy.transpose")
    return wrap(result, np.transpose(partials, (0,) + lane_axes(order)))


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    """Return ``a`` with two axes interchanged."""
    if _on_device(a):
        order = list(range(a.ndim))
        (first,) = normalize_axes(axis1, a.ndim, "numpy.swapaxes")
        (second,) = normalize_axes(axis2, a.ndim, "numpy.swapaxes")
        order[first], order[second] = order[second], order[first]
        return _device_permuted(a, tuple(order))
    values, partials = _pair(a, "numpy.swapaxes")
    result = np.swapaxes(values, axis1, axis2)
    if partials is None:
        return wrap(result, None)
    (first,) = normalize_axes(axis1, values.ndim, "numpy.swapaxes")
    (second,) = normalize_axes(axis2, values.ndim, "numpy.swapaxes")
    return wrap(result, np.swapaxes(partials, first + 1, second + 1))


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    """Return ``a`` with axes moved to new positions."""
    if _on_device(a):
        src = normalize_axes(source, a.ndim, "numpy.moveaxis")
        dst = normalize_axes(destination, a.ndim, "numpy.moveaxis")
        order = [n for n in range(a.ndim) if n not in src]  # numpy's own construction
        for d, s_ in sorted(zip(dst, src)):
            order.insert(d, s_)
        return _device_permuted(a, tuple(order))
    values, partials = _pair(a, "numpy.moveaxis")
    result = np.moveaxis(values, source, destination)
    if partials is None:
        return wrap(result, None)
    src = normalize_axes(source, values.ndim, "numpy.moveaxis")
    dst = normalize_axes(destination, values.ndim, "numpy.moveaxis")
    return wrap(result, np.moveaxis(partials, lane_axes(src), lane_axes(dst)))


def _squeezed_axes(shape, axis):
    """The axes ``np.squeeze(x, axis)`` removes from an array of ``shape`` (numpy's errors)."""
    if axis is None:
        return tuple(i for i, s in enumerate(shape) if s == 1)
    axes = normalize_axes(axis, len(shape), "numpy.squeeze")
    np.squeeze(np.broadcast_to(0, shape), axis=axes)  # numpy's error for an axis not of size 1
    return axes


@implements(np.squeeze)
def squeeze(a, axis=None):
    """Return ``a`` without its length-one axes (or the ones named)."""
    if _on_device(a):
        # the device arrays' own squeeze: a view (numba.cuda's squeeze, and a view of the
        # simulator's memory), so a kernel writing into u.squeeze() writes into u
        axes = _squeezed_axes(a.shape, axis)
        return DualArray(a.values.squeeze(axis=axes), a.partials.squeeze(axis=lane_axes(axes)))
    values, partials = _pair(a, "numpy.squeeze")
    result = np.squeeze(values, axis=axis)
    if partials is None:
        return wrap(result, None)
    return wrap(result, np.squeeze(partials, axis=lane_axes(_squeezed_axes(values.shape, axis))))


@implements(np.expand_dims)
def expand_dims(a, axis):
    """Return ``a`` with length-one axes inserted at ``axis``."""
    if _on_device(a) and a.values.is_c_contiguous() and a.partials.is_c_contiguous():
        # a reshape of contiguous device arrays: a view, as for the values of plain code
        return reshape(a, np.expand_dims(np.broadcast_to(0, a.shape), axis).shape)
    values, partials = _pair(a, "numpy.expand_dims")
    result = np.expand_dims(values, axis)
    if partials is None:
        return wrap(result, None)
    axes = normalize_axes(axis, result.ndim, "numpy.expand_dims")
    return wrap(result, np.expand_dims(partials, lane_axes(axes)))


def _atleast(ndim, arys):
    out = []
    for a in arys:
        if not is_dual(a):
            out.append([np.atleast_1d, np.atleast_2d, np.atleast_3d][ndim - 1](a))
            continue
        shape = shape_of(a)
        if len(shape) >= ndim:
            out.append(a)
        elif ndim == 1:
            out.append(reshape(a, (1,)))
        elif ndim == 2:
            out.append(reshape(a, (1,) + shape if shape else (1, 1)))
        else:
            new = {0: (1, 1, 1), 1: (1,) + shape + (1,), 2: shape + (1,)}[len(shape)]
            out.append(reshape(a, new))
    return out[0] if len(out) == 1 else out


@implements(np.atleast_1d)
def atleast_1d(*arys):
    """Return the operands with at least one dimension (numpy's rules)."""
    return _atleast(1, arys)


@implements(np.atleast_2d)
def atleast_2d(*arys):
    """Return the operands with at least two dimensions (numpy's rules)."""
    return _atleast(2, arys)


@implements(np.atleast_3d)
def atleast_3d(*arys):
    """Return the operands with at least three dimensions (numpy's rules)."""
    return _atleast(3, arys)


@implements(np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    """Return ``array`` broadcast to ``shape`` (read-only values, like numpy's)."""
    values, partials = _pair(array, "numpy.broadcast_to")
    result = np.broadcast_to(values, shape)
    if partials is None:
        return wrap(result, None)
    return wrap(result, np.broadcast_to(lift(partials, result.ndim),
                                        (partials.shape[0],) + result.shape))


# ---------------------------------------------------------------------------
# joining and splitting
# ---------------------------------------------------------------------------
def _joined(fname, arrays):
    pairs = [_pair(a, fname) for a in arrays]
    lanes = common_lanes([p for _, p in pairs], fname)
    return pairs, lanes


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Return the arrays joined along ``axis``; plain ones get zero partials."""
    reject("numpy.concatenate", {}, out=out)
    arrays = list(arrays)
    pairs, lanes = _joined("numpy.concatenate", arrays)
    result = np.concatenate([v for v, _ in pairs], axis=axis, dtype=dtype, casting=casting)
    if lanes == 0:
        return wrap(result, None)
    parts = [full_partials(p, lanes, v.shape, result.dtype) for v, p in pairs]
    if axis is None:
        return wrap(result, np.concatenate([q.reshape(lanes, -1) for q in parts], axis=1))
    (ax,) = normalize_axes(axis, result.ndim, "numpy.concatenate")
    return wrap(result, np.concatenate(parts, axis=ax + 1))


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Return the arrays stacked along a new ``axis`` (Duals make a DualArray)."""
    reject("numpy.stack", {}, out=out)
    arrays = list(arrays)
    pairs, lanes = _joined("numpy.stack", arrays)
    result = np.stack([v for v, _ in pairs], axis=axis, dtype=dtype, casting=casting)
    if lanes == 0:
        return wrap(result, None)
    (ax,) = normalize_axes(axis, result.ndim, "numpy.stack")
    parts = [full_partials(p, lanes, v.shape, result.dtype) for v, p in pairs]
    return wrap(result, np.stack(parts, axis=ax + 1))


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    """Return the arrays joined horizontally (numpy's rules)."""
    arrays = atleast_1d(*tup)
    arrays = arrays if isinstance(arrays, list) else [arrays]
    axis = 0 if ndim_of(arrays[0]) == 1 else 1
    return concatenate(arrays, axis=axis, dtype=dtype, casting=casting)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    """Return the arrays joined vertically (numpy's rules)."""
    arrays = atleast_2d(*tup)
    arrays = arrays if isinstance(arrays, list) else [arrays]
    return concatenate(arrays, axis=0, dtype=dtype, casting=casting)


@implements(np.append)
def append(arr, values, axis=None):
    """Return ``arr`` with ``values`` appended (both flattened when ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(arr) if is_dual(arr) else np.ravel(arr),
                            ravel(values) if is_dual(values) else np.ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


def _split(fname, numpy_split, ary, indices_or_sections, axis):
    values, partials = _pair(ary, fname)
    pieces = numpy_split(values, indices_or_sections, axis=axis)
    if partials is None:
        return pieces
    (ax,) = normalize_axes(axis, values.ndim, fname)
    lane_pieces = numpy_split(partials, indices_or_sections, axis=ax + 1)
    return [wrap(v, p) for v, p in zip(pieces, lane_pieces)]


@implements(np.split)
def split_(ary, indices_or_sections, axis=0):
    """Return the list of sub-arrays (views) of ``ary`` split along ``axis``."""
    return _split("numpy.split", np.split, ary, indices_or_sections, axis)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    """Return the list of sub-arrays, allowing unequal division."""
    return _split("numpy.array_split", np.array_split, ary, indices_or_sections, axis)


# ---------------------------------------------------------------------------
# selection
# ---------------------------------------------------------------------------
@implements(np.where)
def where(condition, x=None, y=None):
    """Return elements of ``x`` where ``condition`` holds, else of ``y`` (partials alike)."""
    condition = np.asarray(split(condition)[0])
    if x is None and y is None:
        return np.where(condition)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    (xv, xp), (yv, yp) = split(x, "numpy.where operand"), split(y, "numpy.where operand")
    result = np.where(condition, xv, yv)  # Python numbers stay weak: float32 stays float32
    lanes = common_lanes([xp, yp], "numpy.where")
    if lanes == 0:
        return wrap(result, None)
    ndim = result.ndim
    xq = 0 if xp is None else lift(xp, ndim)
    yq = 0 if yp is None else lift(yp, ndim)
    partials = np.where(condition, xq, yq)
    partials = np.broadcast_to(partials, (lanes,) + result.shape)
    return wrap(result, np.array(partials, dtype=result.dtype))


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    """Return elements of ``a`` at ``indices`` along ``axis`` (of the flattened array if None)."""
    reject("numpy.take", {}, out=out)
    _plain_index("numpy.take", indices)
    values, partials = _pair(a, "numpy.take")
    result = np.take(values, indices, axis=axis, mode=mode)
    if partials is None:
        return wrap(result, None)
    if axis is None:
        flat = partials.reshape(partials.shape[0], -1)
        return wrap(result, np.take(flat, indices, axis=1, mode=mode))
    (ax,) = normalize_axes(axis, values.ndim, "numpy.take")
    return wrap(result, np.take(partials, indices, axis=ax + 1, mode=mode))


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """Return ``arr`` picked by an index array along ``axis`` (e.g. from ``argsort``)."""
    _plain_index("numpy.take_along_axis", indices)
    values, partials = _pair(arr, "numpy.take_along_axis")
    indices = np.asarray(indices)
    result = np.take_along_axis(values, indices, axis=axis)
    if partials is None:
        return wrap(result, None)
    if axis is None:
        flat = partials.reshape(partials.shape[0], -1)
        return wrap(result, np.take_along_axis(flat, indices[None], axis=1))
    (ax,) = normalize_axes(axis, values.ndim, "numpy.take_along_axis")
    return wrap(result, np.take_along_axis(partials, indices[None], axis=ax + 1))


def _plain_index(fname, indices):
    if is_dual(indices):
        raise DualgpuError(
            f"{fname}: the indices are a {type(indices).__name__}; expected integers. Fix: "
            "compute indices from the values (np.argsort(u.values), .astype(int))."
        )


@implements(np.flip)
def flip(m, axis=None):
    """Return ``m`` with the order of elements reversed along ``axis`` (all axes if None)."""
    values, partials = _pair(m, "numpy.flip")
    result = np.flip(values, axis=axis)
    if partials is None:
        return wrap(result, None)
    axes = tuple(range(values.ndim)) if axis is None else normalize_axes(
        axis, values.ndim, "numpy.flip")
    return wrap(result, np.flip(partials, axis=lane_axes(axes)))


@implements(np.fliplr)
def fliplr(m):
    """Return ``m`` flipped left to right (axis 1)."""
    return flip(m, axis=1)


@implements(np.flipud)
def flipud(m):
    """Return ``m`` flipped up to down (axis 0)."""
    return flip(m, axis=0)


@implements(np.roll)
def roll(a, shift, axis=None):
    """Return ``a`` rolled by ``shift`` along ``axis`` (the flattened array if None)."""
    values, partials = _pair(a, "numpy.roll")
    result = np.roll(values, shift, axis=axis)
    if partials is None:
        return wrap(result, None)
    lanes = partials.shape[0]
    if axis is None:
        rolled = np.roll(partials.reshape(lanes, -1), shift, axis=1)
        return wrap(result, rolled.reshape((lanes,) + values.shape))
    axes = normalize_axes(axis, values.ndim, "numpy.roll")
    return wrap(result, np.roll(partials, shift, axis=lane_axes(axes)
                                if isinstance(axis, (tuple, list)) else axes[0] + 1))


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    """Return ``a`` with each element repeated (the flattened array if ``axis`` is None)."""
    values, partials = _pair(a, "numpy.repeat")
    result = np.repeat(values, repeats, axis=axis)
    if partials is None:
        return wrap(result, None)
    if axis is None:
        return wrap(result, np.repeat(partials.reshape(partials.shape[0], -1), repeats, axis=1))
    (ax,) = normalize_axes(axis, values.ndim, "numpy.repeat")
    return wrap(result, np.repeat(partials, repeats, axis=ax + 1))


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=None, append=None):
    """Return the n-th differences along ``axis``; ``prepend``/``append`` may be duals."""
    shape = shape_of(a)
    (ax,) = normalize_axes(axis, len(shape), "numpy.diff")
    if prepend is not None or append is not None:
        pieces = []
        for extra, part in ((prepend, "before"), (None, "a"), (append, "after")):
            if part == "a":
                pieces.append(a)
            elif extra is not None:
                if ndim_of(extra) == 0:
                    edge = list(shape)
                    edge[ax] = 1
                    extra = broadcast_to(extra, tuple(edge)) if is_dual(extra) else \
                        np.broadcast_to(extra, tuple(edge))
                pieces.append(extra)
        a = concatenate(pieces, axis=ax)
    values, partials = _pair(a, "numpy.diff")
    result = np.diff(values, n=n, axis=ax)
    if partials is None:
        return wrap(result, None)
    return wrap(result, np.diff(partials, n=n, axis=ax + 1))


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Return a sorted copy; each element keeps its partials (ties in a stable order)."""
    reject("numpy.sort", {}, order=order)
    values, partials = _pair(a, "numpy.sort")
    result = np.sort(values, axis=axis, kind=kind, stable=stable)
    if partials is None:
        return wrap(result, None)
    if axis is None:
        index = np.argsort(values.reshape(-1), kind="stable")
        return wrap(result, partials.reshape(partials.shape[0], -1)[:, index])
    (ax,) = normalize_axes(axis, values.ndim, "numpy.sort")
    index = np.argsort(values, axis=ax, kind="stable")
    return wrap(result, np.take_along_axis(partials, index[None], axis=ax + 1))


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **unsupported):
    """Return ``minimum(maximum(a, a_min), a_max)``: the partials of whichever won."""
    reject("numpy.clip", unsupported, out=out)
    low = a_min if min is None else min
    high = a_max if max is None else max
    result = a
    if low is not None:
        result = np.maximum(result, low)
    if high is not None:
        result = np.minimum(result, high)
    return result


@implements(np.round, getattr(np, "around", None), getattr(np, "round_", None))
def round_(a, decimals=0, out=None):
    """Return ``a`` rounded to ``decimals``: the values rounded, zero partials."""
    reject("numpy.round", {}, out=out)
    values, partials = _pair(a, "numpy.round")
    result = np.round(values, decimals)
    if partials is None:
        return wrap(result, None)
    return wrap(result, np.zeros((partials.shape[0],) + np.shape(result), np.result_type(result)))


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    """Return ``array`` padded; modes constant (zero partials), edge, reflect, symmetric, wrap."""
    if mode not in _PAD_MODES or any(is_dual(v) for v in kwargs.values()):
        raise DualgpuError(
            f"numpy.pad on duals: mode={mode!r} is not supported (modes {_PAD_MODES} are, with "
            "plain keyword values)."
        )
    values, partials = _pair(array, "numpy.pad")
    result = np.pad(values, pad_width, mode=mode, **kwargs)
    if partials is None:
        return wrap(result, None)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (values.ndim, 2))
    lane_widths = np.concatenate([[[0, 0]], widths])
    lane_kwargs = {k: v for k, v in kwargs.items() if k != "constant_values"}
    return wrap(result, np.pad(partials, lane_widths, mode=mode, **lane_kwargs))


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """Return the gradient of ``f`` by central differences (plain spacings)."""
    if any(is_dual(v) for v in varargs):
        raise DualgpuError(
            "numpy.gradient on duals: the spacings must be plain numbers or arrays; only f "
            "may be a dual."
        )
    values, partials = _pair(f, "numpy.gradient")
    result = np.gradient(values, *varargs, axis=axis, edge_order=edge_order)
    if partials is None:
        return result
    axes = tuple(range(values.ndim)) if axis is None else normalize_axes(
        axis, values.ndim, "numpy.gradient")
    lane_result = np.gradient(partials, *varargs, axis=lane_axes(axes), edge_order=edge_order)
    if isinstance(result, (list, tuple)):
        return type(result)(wrap(v, p) for v, p in zip(result, lane_result))
    return wrap(result, lane_result)


# ---------------------------------------------------------------------------
# creation and copies, on the template's side (host or device)
# ---------------------------------------------------------------------------
def _like(fname, a, dtype, shape, fill):
    """A new array shaped like ``a`` (or ``shape``) filled with ``fill`` (values, partials)."""
    template_values = a.values if isinstance(a, DualArray) else None
    base_dtype = np.dtype(a.dtype) if is_dual(a) else np.asarray(a).dtype
    dtype = base_dtype if dtype is None else np.dtype(dtype)
    shape = shape_of(a) if shape is None else ((shape,) if np.ndim(shape) == 0 else tuple(shape))
    fill_values, fill_partials = fill
    values = np.empty(shape, dtype)
    if fill_values is not None:
        values[...] = fill_values
    if dtype.kind != "f" or not (is_dual(a) or fill_partials is not None):
        return values
    lanes = common_lanes([a.partials if is_dual(a) else None, fill_partials], fname)
    if isinstance(a, DualArray) and a.is_tracer and fill_partials is None:
        # sparsity detection: zero dependency sets, so kernels see one kind of lanes
        result = DualArray(values, np.zeros((lanes,) + shape, a.partials.dtype))
    else:
        partials = np.zeros((lanes,) + shape, dtype)
        if fill_partials is not None:
            partials[...] = lift(fill_partials, len(shape))
        result = wrap(values, partials)
    if isinstance(result, DualArray) and template_values is not None:
        result = DualArray(same_side(template_values, result.values),
                           same_side(template_values, result.partials))
    return result


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Return zeros like ``a``: a DualArray with zero partials and ``a``'s lanes and side."""
    return _like("numpy.zeros_like", a, dtype, shape, (0, None))


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Return ones like ``a``: a DualArray with zero partials and ``a``'s lanes and side."""
    return _like("numpy.ones_like", a, dtype, shape, (1, None))


@implements(np.empty_like)
def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Return an array like ``prototype``: uninitialised values, zero partials, same lanes."""
    return _like("numpy.empty_like", prototype, dtype, shape, (None, None))


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Return ``fill_value`` everywhere, shaped like ``a``; a Dual fill carries its partials."""
    values, partials = split(fill_value, "numpy.full_like fill value")
    return _like("numpy.full_like", a, dtype, shape, (values, partials))


@implements(np.copy)
def copy(a, order="K", subok=False):
    """Return a copy of ``a`` (on the same side)."""
    if isinstance(a, DualArray):
        return a.copy()
    if isinstance(a, Dual):
        return Dual(a.value, a.partials, dtype=a.dtype)
    return np.copy(a, order=order)


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """Copy ``src`` into ``dst`` (a DualArray), where ``where`` holds."""
    if not isinstance(dst, DualArray):
        if hooks.values_followed():  # a line dualgpu.host.host_writes replayed: values
            np.copyto(dst, _values_of(src), casting=casting, where=where)
            return
        if where is True and isinstance(dst, np.ndarray):  # kept, or refused with the line
            host_buffers.store_out("copyto", dst, src)
            return
        raise DualgpuError(
            f"numpy.copyto(dst, src): dst is a {type(dst).__name__} and src is a dual, so the "
            "partials would be dropped. Fix: make dst a DualArray (np.zeros_like(src))."
        )
    if where is True:
        dst[...] = src
    else:
        dst[...] = np.where(where, src, dst.copy())


# ---------------------------------------------------------------------------
# questions about the values (plain answers: no derivative exists)
# ---------------------------------------------------------------------------
def _on_values(function):
    def on_values(*args, **kwargs):
        DECISIONS[0] += 1  # an answer taken from the values (see dualgpu.core.dual)
        args = [_values_of(a) for a in args]
        kwargs = {k: _values_of(v) for k, v in kwargs.items()}
        return function(*args, **kwargs)

    on_values.__name__ = function.__name__
    on_values.__doc__ = f"numpy.{function.__name__} of the values (a plain answer)."
    return on_values


def _values_of(x):
    if isinstance(x, DualArray):
        return host(x.values)
    if isinstance(x, Dual):
        return x.value
    if isinstance(x, (list, tuple)) and any(is_dual(i) for i in x):
        return type(x)(_values_of(i) for i in x)
    return x


#: numpy functions whose answer is about the values only: indices, counts, booleans.
#: They see the values; their answers are plain.
VALUE_FUNCTIONS = (
    np.argmax, np.argmin, np.argsort, np.argwhere, np.nonzero, np.flatnonzero,
    np.count_nonzero, np.searchsorted, np.digitize, np.isclose, np.allclose,
    np.array_equal, np.array_equiv,
)


@implements(np.shape)
def shape(a):
    """Return the shape (no copy from device memory)."""
    return shape_of(a)


@implements(np.ndim)
def ndim(a):
    """Return the number of dimensions."""
    return ndim_of(a)


@implements(np.size)
def size(a, axis=None):
    """Return the number of elements (along ``axis``)."""
    dims = shape_of(a)
    if axis is None:
        return int(np.prod(dims, dtype=np.intp))
    return dims[axis]


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    """Return numpy's result type, with duals standing for their dtype."""
    return np.result_type(*(np.dtype(x.dtype) if is_dual(x) else x for x in arrays_and_dtypes))


@implements(np.iscomplexobj)
def iscomplexobj(x):
    """True for a complex dual (its dtype is complex64 or complex128)."""
    return np.dtype(x.dtype).kind == "c" if is_dual(x) else np.iscomplexobj(x)


@implements(np.isrealobj)
def isrealobj(x):
    """True for a real dual."""
    return np.dtype(x.dtype).kind != "c" if is_dual(x) else np.isrealobj(x)
for _function in VALUE_FUNCTIONS:
    if _function is not None:
        implements(_function)(_on_values(_function))
