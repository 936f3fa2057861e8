"""numpy's protocols for host duals: ``__array_ufunc__`` and ``__array_function__``.

:class:`~dualgpu.DualArray` and :class:`~dualgpu.Dual` hand every numpy call made on them
here, so host code after a run (an objective, a centroid, a norm, a misfit against
data) keeps its derivatives: ``np.sum(w * u**2)``, ``u @ x``, ``np.linalg.norm(u - data)``,
``u.max()``, ``np.concatenate([u, v])``...

* ufuncs: :mod:`dualgpu.host.ufuncs`, generated from the rule table;
* other functions, written by hand: :mod:`dualgpu.host.reductions` (sum, mean, prod, max,
  min, cumsum, var, std, average, trapezoid), :mod:`dualgpu.host.linalg` (dot, matmul,
  einsum, tensordot, linalg.norm, convolve, interp...) and :mod:`dualgpu.host.shapes`
  (reshape, transpose, concatenate, stack, where, take, sort, pad, zeros_like...).

Anything else raises :class:`~dualgpu.errors.MissingRuleError` naming the function:
numpy's fallback would turn the dual into a plain array and drop its partials.
``np.asarray(u)`` still refuses, for the same reason.

Dual arrays in device memory (the ``cuda`` backend's device arrays, the simulator's)
are copied to the host first, as numba.cuda's own device arrays are under numpy; the
answer is a host array. ``np.zeros_like`` and friends, ``.copy()`` and ``.astype()``
keep the side of their template.

Examples
--------
>>> import numpy as np, dualgpu
>>> u = dualgpu.dual_array([1.0, 2.0, 3.0], np.eye(3))   # lane k: d/du[k]
>>> x = np.array([0.0, 0.5, 1.0])
>>> centroid = np.sum(x * u) / np.sum(u)                  # a Dual
>>> round(float(centroid.value), 6), np.round(centroid.partials, 6).tolist()
(0.666667, [-0.111111, -0.027778, 0.055556])
>>> energy = 0.5 * np.sum(u ** 2)
>>> energy.partials.tolist()
[1.0, 2.0, 3.0]
"""
import numpy as np

from dualgpu.host import complex_parts as host_complex_parts
from dualgpu.host import fft as host_fft
from dualgpu.host import linalg as host_linalg
from dualgpu.host import quantiles as host_quantiles
from dualgpu.host import reductions as host_reductions
from dualgpu.host import shapes as host_shapes
from dualgpu.host import solve as host_solve
from dualgpu.host import tracer as host_tracer
from dualgpu.host import ufuncs as host_ufuncs
from dualgpu.core.dual import Dual
from dualgpu.core.dualarray import DualArray
from dualgpu.errors import DualgpuError, MissingRuleError
from dualgpu.host.operands import split, wrap
from dualgpu.host import buffers as host_buffers

__all__ = ["array_ufunc", "array_function", "HANDLED_FUNCTIONS", "supported_functions"]

#: numpy function -> implementation for duals (hand-written; see the modules above).
HANDLED_FUNCTIONS = {
    **host_reductions.FUNCTIONS,
    **host_quantiles.FUNCTIONS,
    **host_linalg.FUNCTIONS,
    **host_solve.FUNCTIONS,
    **host_shapes.FUNCTIONS,
    **host_complex_parts.FUNCTIONS,
    **host_fft.FUNCTIONS,
}


def _vecdot(x1, x2, axis=-1, **kwargs):
    value = np.vecdot(split(x1)[0], split(x2)[0], axis=axis, **kwargs)
    partials = split(np.sum(np.multiply(x1, x2), axis=axis))[1]
    return wrap(value, partials)


#: generalised ufuncs (not elementwise) and their implementations.
_GUFUNCS = {"matmul": host_linalg.matmul, "vecdot": _vecdot}


def _name(function):
    module = getattr(function, "__module__", None) or "numpy"
    return f"{module}.{getattr(function, '__name__', repr(function))}"


def supported_functions():
    """Return the sorted names of the numpy functions duals support (ufuncs apart)."""
    return sorted({_name(f) for f in HANDLED_FUNCTIONS})


def _unsupported(function):
    name = _name(function)
    short = name.rsplit(".", 1)[-1]
    return MissingRuleError(
        f"{name} is not supported on a Dual or DualArray: dualgpu has no derivative for it, "
        "and numpy's own version would drop the partials. Fix: call it on the values "
        f"({short}(u.values)) if no derivative is wanted; write it with supported "
        "operations; or add an implementation with @implements(numpy function) in "
        "dualgpu/host/reductions.py, linalg.py, solve.py or shapes.py. Supported numpy "
        "functions: "
        f"{', '.join(supported_functions())}; and the ufuncs "
        f"{', '.join(host_ufuncs.supported_ufuncs())}."
    )


def _ours(kind):
    return issubclass(kind, (np.ndarray, np.generic, Dual, DualArray))


def _foreign(objects):
    """True when an operand is another library's array that should handle the call itself."""
    for x in objects:
        kind = type(x)
        if _ours(kind) or hasattr(x, "copy_to_host"):
            continue
        if getattr(kind, "__array_ufunc__", None) is not None and kind.__module__ != "builtins":
            return True
    return False


def _tagged(x):
    """True for a Dual or DualArray of a nested derivative (a tag, or dual members)."""
    if isinstance(x, Dual):
        return bool(x.tag) or isinstance(x.value, Dual)
    return isinstance(x, DualArray) and (bool(x.tag) or x.is_nested)


def _refuse_nested(name, items):
    """Raise for duals of a nested derivative: the host operations know first order only."""
    flat = []
    for item in items:
        flat.extend(item if isinstance(item, (list, tuple)) else (item,))
    if any(_tagged(x) for x in flat):
        raise DualgpuError(
            f"numpy.{name} on the host got duals of a nested derivative (hessian, hvp, "
            "jacfwd(jacfwd(f))); host numpy operations support first-order duals only, and "
            "would mix the two derivatives' partials. Compute the objective in a kernel, or "
            "from .sum()/.mean() and elements (u[i]) of the array, whose Dual arithmetic "
            "handles nesting; or take this derivative to first order."
        )


def array_ufunc(ufunc, method, inputs, kwargs):
    """Return ``getattr(ufunc, method)(*inputs, **kwargs)`` for inputs holding duals."""
    out = kwargs.get("out") or ()
    inputs = host_buffers.substitute(inputs)  # host buffers that kernels wrote duals into
    _refuse_nested(ufunc.__name__, inputs)
    if _foreign(tuple(inputs) + tuple(out if isinstance(out, tuple) else (out,))):
        return NotImplemented
    name = ufunc.__name__
    if name in _GUFUNCS and method == "__call__":
        return _GUFUNCS[name](*inputs, **kwargs)
    if method == "__call__":
        return host_ufuncs.call(ufunc, inputs, dict(kwargs))
    if method == "outer":
        return host_ufuncs.outer(ufunc, inputs, kwargs)
    if method == "at":
        return host_ufuncs.at(ufunc, inputs, kwargs)
    table = {"reduce": host_reductions.UFUNC_REDUCE,
             "accumulate": host_reductions.UFUNC_ACCUMULATE}.get(method, {})
    if name in table:
        return table[name](*inputs, **kwargs)
    raise MissingRuleError(
        f"numpy.{name}.{method} is not supported on a Dual or DualArray (it would drop the "
        "partials). Supported: np.add.reduce / np.multiply.reduce / np.maximum.reduce / "
        "np.minimum.reduce, np.add.accumulate, ufunc.outer, np.add.at / np.subtract.at. Fix: "
        f"call it on the values if no derivative is wanted (np.{name}.{method}(u.values))."
    )


def array_function(function, types, args, kwargs):
    """Return ``function(*args, **kwargs)`` for arguments holding duals."""
    if not all(_ours(kind) for kind in types):
        return NotImplemented
    args = host_buffers.substitute(args)  # host buffers that kernels wrote duals into
    _refuse_nested(getattr(function, "__name__", str(function)), args)
    if function in host_tracer.MOVES_DATA and host_tracer.has_tracer(args, kwargs):
        return host_tracer.call(function, args, kwargs)  # sparsity detection: np.stack...
    impl = HANDLED_FUNCTIONS.get(function)
    if impl is None:
        raise _unsupported(function)
    return impl(*args, **kwargs)
