"""Order statistics of host duals: ``np.median``, ``np.quantile``, ``np.percentile``.

Numpy's default (``method="linear"``) quantile of m values is the interpolation between two
order statistics, ``(1 - g) x_(k) + g x_(k+1)`` with ``h = q (m - 1)``, ``k = floor(h)`` and
``g = h - k`` (the median: the middle value, or the mean of the two middle ones). The answer's
partials are the same combination of those two elements' partials (the elements picked by a
stable sort of the values: on ties the first in the array). The values are numpy's own.
A NaN among the values makes the answer NaN, as in numpy.

Examples
--------
>>> import numpy as np, dualgpu
>>> u = dualgpu.dual_array(np.array([3.0, 1.0, 2.0, 4.0]), np.eye(4))
>>> m = np.median(u)
>>> float(m.value), m.partials.tolist()    # the mean of 2 and 3
(2.5, [0.5, 0.0, 0.5, 0.0])
"""
import numpy as np

from dualgpu.host.operands import normalize_axes, registrar, reject, split, wrap

__all__ = ["FUNCTIONS"]

#: numpy function -> implementation, read by :mod:`dualgpu.host.protocol`.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)


def _quantile(fname, a, q, axis, keepdims, method, unsupported, out=None, scale=1.0,
              numpy_fn=np.quantile):
    reject(fname, unsupported, out=out)
    if method != "linear":
        raise NotImplementedError(
            f"{fname} on duals: method={method!r} is not supported; the default "
            "method='linear' is. Fix: call it without method=, or on the values (u.values) "
            "if no derivative is wanted.")
    if split(q)[1] is not None:
        raise NotImplementedError(
            f"{fname} on duals: q is a dual; derivatives with respect to the quantile level "
            "are not supported. Fix: pass q as plain numbers when the result need not depend on "
            "it (q.value drops its derivative), or write the quantile's formula in dual "
            "arithmetic.")
    values, partials = split(a)
    values = np.asarray(values)
    answer = numpy_fn(values, split(q)[0], axis=axis, keepdims=keepdims)  # numpy's own values
    q_plain = np.asarray(split(q)[0], dtype=np.float64) / scale
    if partials is None:
        return answer
    lanes, ndim = partials.shape[0], values.ndim
    axes = normalize_axes(axis, ndim, fname)
    axes = tuple(range(ndim)) if axes is None else axes
    k = len(axes)
    x = np.moveaxis(values, axes, range(ndim - k, ndim))
    p = np.moveaxis(partials, [a + 1 for a in axes], range(ndim + 1 - k, ndim + 1))
    rest = x.shape[: ndim - k]
    x = x.reshape(rest + (-1,))
    p = p.reshape((lanes,) + rest + (-1,))
    m = x.shape[-1]
    order = np.argsort(x, axis=-1, kind="stable")
    h = q_plain * (m - 1)
    lo = np.floor(h).astype(np.intp)
    hi = np.minimum(lo + 1, m - 1)
    g = (h - lo).astype(values.dtype)
    flat_q = lo.reshape(-1), hi.reshape(-1), g.reshape(-1)
    pick = []
    for lo_k, hi_k, g_k in zip(*flat_q):  # one order statistic pair per q
        first = np.take_along_axis(order, np.full(rest + (1,), lo_k), axis=-1)
        second = np.take_along_axis(order, np.full(rest + (1,), hi_k), axis=-1)
        p_lo = np.take_along_axis(p, first[None], axis=-1)[..., 0]
        p_hi = np.take_along_axis(p, second[None], axis=-1)[..., 0]
        pick.append((1 - g_k) * p_lo + g_k * p_hi)  # (N, *rest)
    stacked = np.stack(pick, axis=1).reshape((lanes,) + q_plain.shape + rest)
    if keepdims:
        kept = [1 if i in axes else s for i, s in enumerate(values.shape)]
        stacked = stacked.reshape((lanes,) + q_plain.shape + tuple(kept))
    return wrap(answer, stacked)


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, **unsupported):
    """``np.quantile`` (``method='linear'``, numpy's default)."""
    return _quantile("numpy.quantile", a, q, axis, keepdims, method, unsupported, out=out)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, **unsupported):
    """``np.percentile`` (``method='linear'``, numpy's default)."""
    return _quantile("numpy.percentile", a, q, axis, keepdims, method, unsupported, out=out,
                     scale=100.0, numpy_fn=np.percentile)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False, **unsupported):
    """``np.median``: the middle value, or the mean of the two middle values."""
    return _quantile("numpy.median", a, 0.5, axis, keepdims, "linear", unsupported, out=out,
                     numpy_fn=lambda x, q, axis, keepdims: np.median(x, axis=axis,
                                                                      keepdims=keepdims))
