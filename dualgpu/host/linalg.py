"""Products, norms, convolutions and interpolation of host duals.

Hand-written: none of these is elementwise. Products are multilinear, so the partials
of ``f(a, b)`` are ``f(da, b) + f(a, db)``, with the lane axis of ``da`` carried through
``f`` as one more free axis (einsum with an extra index, or the product on the lane-major
partials with the lane axis moved where the product leaves it). The values are numpy's
own answer, bit for bit.

Conventions
-----------
* ``np.linalg.norm`` where the norm is 0: zero partials for the 2-norm and the Frobenius
  norm (as ``hypot(0, 0)`` in the rule table), ``|x|`` taking +1 at 0 for the others.
* ``np.interp``: derivative from the right at the sample points ``xp``; zero outside
  ``[xp[0], xp[-1]]`` with respect to ``x``. Derivatives with respect to ``xp`` are not
  supported (an error says so).
"""
import string

import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.host.operands import (
    common_lanes, full_partials, is_dual, lane_axes, lift, ndim_of, normalize_axes,
    registrar, reject, split, wrap,
)

__all__ = ["FUNCTIONS", "matmul"]

#: numpy function -> implementation, read by :mod:`dualgpu.host.protocol`.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)


def _sum_terms(terms):
    total = None
    for term in terms:
        if term is not None:
            total = term if total is None else total + term
    return total


def _operands(fname, *operands):
    pairs = [split(x, f"{fname} operand") for x in operands]
    lanes = common_lanes([p for _, p in pairs], fname)
    return pairs, lanes


# ---------------------------------------------------------------------------
# einsum: every product below could be one, but numpy's own is faster
# ---------------------------------------------------------------------------
def _implicit_output(inputs):
    letters = inputs.replace(",", "").replace(".", "")
    out = "".join(c for c in sorted(set(letters)) if letters.count(c) == 1)
    return ("..." if "..." in inputs else "") + out


@implements(np.einsum)
def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    """Return ``np.einsum(subscripts, *operands)``; each dual operand adds one term."""
    reject("numpy.einsum", {k: v for k, v in kwargs.items() if k not in ("dtype", "casting",
                                                                          "order")}, out=out)
    if not isinstance(subscripts, str):
        raise DualgpuError(
            "numpy.einsum on duals takes the subscripts as a string ('ij,j->i'); the "
            "interleaved form einsum(a, [0, 1], b, [1]) is not supported."
        )
    spec = subscripts.replace(" ", "")
    inputs, _, output = spec.partition("->")
    if "->" not in spec:
        output = _implicit_output(inputs)
    terms = inputs.split(",")
    pairs, _ = _operands("numpy.einsum", *operands)
    values = [v for v, _ in pairs]
    result = np.einsum(subscripts, *values, optimize=optimize, **kwargs)
    if all(p is None for _, p in pairs):
        return wrap(result, None)
    lane = next(c for c in string.ascii_letters if c not in spec)
    dtype = np.result_type(result)
    parts = []
    for i, (_, p) in enumerate(pairs):
        if p is None:
            continue
        lane_terms = [lane + t if k == i else t for k, t in enumerate(terms)]
        lane_spec = ",".join(lane_terms) + "->" + lane + output
        ops = [p if k == i else v for k, v in enumerate(values)]
        parts.append(np.einsum(lane_spec, *ops, optimize=True).astype(dtype, copy=False))
    return wrap(result, _sum_terms(parts))


# ---------------------------------------------------------------------------
# dot, matmul and friends
# ---------------------------------------------------------------------------
@implements(np.dot)
def dot(a, b, out=None):
    """Return ``np.dot(a, b)`` (a Dual for two vectors)."""
    reject("numpy.dot", {}, out=out)
    if ndim_of(a) == 0 or ndim_of(b) == 0:
        return np.multiply(a, b)
    (av, ap), (bv, bp) = _operands("numpy.dot", a, b)[0]
    av, bv = np.asarray(av), np.asarray(bv)
    result = np.dot(av, bv)
    dtype = np.result_type(result)
    da = db = None
    if ap is not None:
        da = np.dot(ap, bv)  # dot contracts the last axis of ap: the lane axis stays first
    if bp is not None:
        axis_b = bp.ndim - 1 if bv.ndim == 1 else bp.ndim - 2
        db = np.moveaxis(np.tensordot(av, bp, axes=([-1], [axis_b])), av.ndim - 1, 0)
    return wrap(result, _sum_terms([da, db]).astype(dtype, copy=False))


def matmul(a, b, out=None, **kwargs):
    """Return ``a @ b`` (``np.matmul``), with numpy's broadcasting of stacked matrices."""
    reject("numpy.matmul", {k: v for k, v in kwargs.items() if k != "dtype"}, out=out)
    (av, ap), (bv, bp) = _operands("numpy.matmul", a, b)[0]
    av, bv = np.asarray(av), np.asarray(bv)
    result = np.matmul(av, bv, **kwargs)
    dtype = np.result_type(result)
    batch = np.ndim(result)
    da = db = None
    if ap is not None:
        if av.ndim == 1:
            da = np.matmul(ap, bv)  # ap acts as an (N, k) matrix
            if bv.ndim >= 2:
                da = np.moveaxis(da, -2, 0)  # (..., N, n): the vector's lanes became rows
        else:
            da = np.matmul(lift(ap, batch), bv)  # the lane axis is one more batch axis
    if bp is not None:
        if bv.ndim == 1:
            db = np.moveaxis(np.matmul(av, np.moveaxis(bp, 0, -1)), -1, 0)
        else:
            db = np.matmul(av, lift(bp, batch))
    return wrap(result, _sum_terms([da, db]).astype(dtype, copy=False))


@implements(np.vdot)
def vdot(a, b):
    """Return the dot product of the flattened arrays, ``a`` conjugated (complex duals too)."""
    return dot(np.conjugate(np.ravel(a)), np.ravel(b))


@implements(np.inner)
def inner(a, b):
    """Return ``np.inner(a, b)``: a sum over the last axes."""
    if ndim_of(a) == 0 or ndim_of(b) == 0:
        return np.multiply(a, b)
    return tensordot(a, b, axes=([-1], [-1]))


@implements(np.outer)
def outer(a, b, out=None):
    """Return the outer product of the flattened arrays."""
    reject("numpy.outer", {}, out=out)
    return np.multiply(np.reshape(np.ravel(a), (-1, 1)), np.reshape(np.ravel(b), (1, -1)))


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    """Return ``np.tensordot(a, b, axes)``."""
    (av, ap), (bv, bp) = _operands("numpy.tensordot", a, b)[0]
    av, bv = np.asarray(av), np.asarray(bv)
    if isinstance(axes, (int, np.integer)):
        axes_a = list(range(av.ndim - int(axes), av.ndim))
        axes_b = list(range(int(axes)))
    else:
        axes_a, axes_b = axes
        axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
        axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
    axes_a = list(normalize_axes(tuple(axes_a), av.ndim, "numpy.tensordot") or ())
    axes_b = list(normalize_axes(tuple(axes_b), bv.ndim, "numpy.tensordot") or ())
    result = np.tensordot(av, bv, axes=(axes_a, axes_b))
    dtype = np.result_type(result)
    da = db = None
    if ap is not None:
        da = np.tensordot(ap, bv, axes=(list(lane_axes(axes_a)), axes_b))
    if bp is not None:
        db = np.tensordot(av, bp, axes=(axes_a, list(lane_axes(axes_b))))
        db = np.moveaxis(db, av.ndim - len(axes_a), 0)
    return wrap(result, _sum_terms([da, db]).astype(dtype, copy=False))


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Return the sum along a diagonal."""
    reject("numpy.trace", {}, out=out)
    values, partials = split(a)
    axes = normalize_axes((axis1, axis2), np.ndim(values), "numpy.trace")
    result = np.trace(values, offset, axes[0], axes[1], dtype)
    if partials is None:
        return wrap(result, None)
    return wrap(result, np.trace(partials, offset, axes[0] + 1, axes[1] + 1,
                                 np.result_type(result)))


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """Return the diagonal (a copy)."""
    values, partials = split(a)
    axes = normalize_axes((axis1, axis2), np.ndim(values), "numpy.diagonal")
    result = np.diagonal(values, offset, axes[0], axes[1]).copy()
    if partials is None:
        return wrap(result, None)
    return wrap(result, np.diagonal(partials, offset, axes[0] + 1, axes[1] + 1).copy())


# ---------------------------------------------------------------------------
# norms
# ---------------------------------------------------------------------------
def _vector_norm_partials(x, p, order, axes, value, keepdims):
    """Partials of the vector norm of order ``order`` over ``axes`` (x values, p partials)."""
    lanes = p.shape[0]
    keep = np.asarray(value) if keepdims else _keep(np.asarray(value), x.ndim, axes)
    lax = lane_axes(axes)
    if order in (None, 2, 2.0):
        if axes == tuple(range(x.ndim)):
            d = p.reshape(lanes, -1) @ x.reshape(-1)
            d = d.reshape((lanes,) + (1,) * x.ndim)
        else:
            d = np.sum(x * p, axis=lax, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(keep != 0, d / keep, 0)
    elif order == np.inf or order == -np.inf:
        pick = np.argmax if order == np.inf else np.argmin
        flat_x = np.moveaxis(x, axes, range(-len(axes), 0))
        flat_p = np.moveaxis(p, lax, range(-len(axes), 0))
        rest = flat_x.shape[: flat_x.ndim - len(axes)]
        flat_x = flat_x.reshape(rest + (-1,))
        flat_p = flat_p.reshape((lanes,) + rest + (-1,))
        index = pick(np.abs(flat_x), axis=-1)[..., None]
        sign = np.where(np.take_along_axis(flat_x, index, -1) >= 0, 1, -1).astype(x.dtype)
        d = sign[None] * np.take_along_axis(flat_p, index[None], -1)
        d = d.reshape((lanes,) + keep.shape)
    elif order == 0:
        d = np.zeros((lanes,) + keep.shape, x.dtype)
    elif order == 1:
        sign = np.where(x >= 0, 1, -1).astype(x.dtype)  # |x| takes +1 at 0
        d = np.sum(sign * p, axis=lax, keepdims=True)
    else:
        order = float(order)
        sign = np.where(x >= 0, 1, -1).astype(x.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            weight = np.abs(x) ** (order - 1) * sign
            d = np.sum(weight * p, axis=lax, keepdims=True)
            d = np.where(keep != 0, d / keep ** (order - 1), 0)
    return d


def _keep(value, ndim, axes):
    """``value`` (reduced over ``axes`` without keepdims) reshaped as with keepdims."""
    shape = list(value.shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    return value.reshape(shape)


def _squeeze(d, axes, keepdims):
    return d if keepdims else np.squeeze(d, axis=lane_axes(axes))


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Return ``np.linalg.norm(x, ord, axis, keepdims)``; zero partials where the 2-norm is 0."""
    values, partials = split(x, "numpy.linalg.norm operand")
    values = np.asarray(values)
    if values.dtype.kind == "c" and partials is not None:
        vector = values.ndim == 1 or isinstance(axis, (int, np.integer)) or ord in (None, "fro")
        if not vector:
            raise DualgpuError(
                f"numpy.linalg.norm(ord={ord!r}) of a complex DualArray (a matrix norm of "
                "singular values) is not supported. Fix: the Frobenius norm (ord=None) or "
                "vector norms (axis=int), or differentiate a real formulation.")
        return norm(np.abs(x), ord=ord, axis=axis, keepdims=keepdims)  # |z| gives each norm
    value = np.linalg.norm(values, ord=ord, axis=axis, keepdims=keepdims)
    if partials is None:
        return wrap(value, None)
    values = values.astype(np.result_type(value), copy=False)
    nd = values.ndim
    if axis is None:
        axes = tuple(range(nd))
        if ord is None or nd == 0:  # the 2-norm of the flattened array
            d = _vector_norm_partials(values, partials, None, axes, value, keepdims)
            return wrap(value, _squeeze(d, axes, keepdims))
    else:
        axes = normalize_axes(axis, nd, "numpy.linalg.norm")
    if len(axes) == 1 or nd == 0:
        d = _vector_norm_partials(values, partials, ord, axes, value, keepdims)
        return wrap(value, _squeeze(d, axes, keepdims))
    if len(axes) != 2:
        raise DualgpuError(f"numpy.linalg.norm: axis must name 1 or 2 axes; got {axis!r}.")
    if ord in (None, "fro", "f"):
        d = _vector_norm_partials(values, partials, None, axes, value, keepdims)
        return wrap(value, _squeeze(d, axes, keepdims))
    row, col = axes
    if ord in (1, -1, np.inf, -np.inf):
        # numpy's own formulas: max/min over one axis of the sums of |x| over the other
        inner_axis, outer_axis = (row, col) if ord in (1, -1) else (col, row)
        if outer_axis > inner_axis:
            outer_axis -= 1
        pick = np.max if ord in (1, np.inf) else np.min
        composed = pick(np.sum(np.abs(x), axis=inner_axis), axis=outer_axis)
        d = split(composed)[1]
        if keepdims:
            d = _keep(d, nd + 1, lane_axes(axes))
        return wrap(value, d)
    if ord in (2, -2, "nuc"):
        x_last = np.moveaxis(values, axes, (-2, -1))
        p_last = np.moveaxis(partials, lane_axes(axes), (-2, -1))
        u, _, vt = np.linalg.svd(x_last, full_matrices=False)
        if ord == "nuc":
            d = np.einsum("...ik,z...ij,...kj->z...", u, p_last, vt)
        else:
            k = 0 if ord == 2 else -1
            d = np.einsum("...i,z...ij,...j->z...", u[..., :, k], p_last, vt[..., k, :])
        if keepdims:
            d = _keep(d, nd + 1, lane_axes(axes))
        return wrap(value, d)
    raise DualgpuError(f"numpy.linalg.norm on duals: ord={ord!r} is not supported.")


# ---------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------
def _convolve_lanes(p, kernel, mode):
    """Convolve each lane of p (N, n) with the plain 1-D ``kernel``, as np.convolve would."""
    n, m = p.shape[1], kernel.shape[0]
    padded = np.zeros((p.shape[0], n + 2 * (m - 1)), np.result_type(p, kernel))
    padded[:, m - 1:m - 1 + n] = p
    windows = np.lib.stride_tricks.sliding_window_view(padded, m, axis=1)
    full = windows @ kernel[::-1]
    return _crop(full, n, m, mode)


def _crop(full, n, m, mode):
    if mode == "full":
        return full
    if mode == "same":
        length = max(n, m)
        start = (n + m - 1 - length) // 2
        return full[:, start:start + length]
    if mode == "valid":
        length = max(n, m) - min(n, m) + 1
        start = min(n, m) - 1
        return full[:, start:start + length]
    raise ValueError(f"mode must be 'full', 'same' or 'valid'; got {mode!r}")


@implements(np.convolve)
def convolve(a, v, mode="full"):
    """Return the discrete linear convolution of two 1-D sequences (either may be dual)."""
    (av, ap), (vv, vp) = _operands("numpy.convolve", a, v)[0]
    av, vv = np.asarray(av), np.asarray(vv)
    result = np.convolve(av, vv, mode)
    dtype = np.result_type(result)
    n, m = av.size, vv.size
    terms = []
    if ap is not None:
        full = _convolve_lanes(ap.reshape(ap.shape[0], -1), vv.reshape(-1), "full")
        terms.append(_crop(full, n, m, mode))
    if vp is not None:
        full = _convolve_lanes(vp.reshape(vp.shape[0], -1), av.reshape(-1), "full")
        terms.append(_crop(full, n, m, mode))
    return wrap(result, _sum_terms(terms).astype(dtype, copy=False))


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    """Return the cross-correlation of two 1-D sequences: ``convolve(a, v[::-1])``."""
    (av, _), (vv, _) = _operands("numpy.correlate", a, v)[0]
    result = np.correlate(np.asarray(av), np.asarray(vv), mode)
    reverse = v[::-1] if is_dual(v) else np.asarray(v)[::-1]
    out = convolve(a, reverse, mode)
    partials = split(out)[1]
    return wrap(result, partials)


# ---------------------------------------------------------------------------
# interpolation
# ---------------------------------------------------------------------------
@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """Return ``np.interp(x, xp, fp)``; derivatives with respect to ``x`` and ``fp``."""
    if is_dual(xp) or period is not None or is_dual(left) or is_dual(right):
        raise DualgpuError(
            "numpy.interp on duals: derivatives with respect to xp, left, right and the "
            "period= form are not supported; x and fp may be duals. Fix: pass xp.values "
            "(no derivative through the sample points)."
        )
    (xv, xpart), (fv, fpart) = _operands("numpy.interp", x, fp)[0]
    xv, fv = np.asarray(xv), np.asarray(fv)
    xp = np.asarray(xp)
    result = np.asarray(np.interp(xv, xp, fv, left=left, right=right))
    if xpart is None and fpart is None:
        return wrap(result, None)
    dtype = result.dtype
    count = xp.shape[0]
    j = np.clip(np.searchsorted(xp, xv, side="right") - 1, 0, max(count - 2, 0))
    inside = (xv >= xp[0]) & (xv <= xp[-1])
    terms = []
    if fpart is not None:
        lanes = fpart.shape[0]
        if count == 1:
            w_lo, w_hi = np.ones(xv.shape, dtype), np.zeros(xv.shape, dtype)
            j_hi = j
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                t = (xv - xp[j]) / (xp[j + 1] - xp[j])
            w_hi = np.where(inside, t, np.where(xv > xp[-1], 1.0, 0.0))
            w_lo = np.where(inside, 1.0 - t, np.where(xv < xp[0], 1.0, 0.0))
            j_hi = j + 1
            at_end = xv == xp[-1]
            w_lo, w_hi = np.where(at_end, 0.0, w_lo), np.where(at_end, 1.0, w_hi)
        if left is not None:
            w_lo = np.where(xv < xp[0], 0.0, w_lo)
            w_hi = np.where(xv < xp[0], 0.0, w_hi)
        if right is not None:
            w_lo = np.where(xv > xp[-1], 0.0, w_lo)
            w_hi = np.where(xv > xp[-1], 0.0, w_hi)
        flat = fpart.reshape(lanes, -1)
        terms.append(flat[:, j] * w_lo + flat[:, j_hi] * w_hi)
    if xpart is not None and count > 1:
        slope = (fv[j + 1] - fv[j]) / (xp[j + 1] - xp[j])
        slope = np.where(inside & (xv < xp[-1]), slope, 0.0)
        terms.append(slope * lift(xpart, xv.ndim))
    total = _sum_terms(terms)
    if total is None:
        total = full_partials(None, common_lanes([xpart, fpart], "numpy.interp"), xv.shape,
                              dtype)
    return wrap(result, np.array(np.broadcast_to(total, (total.shape[0],) + result.shape),
                                 dtype=dtype))
