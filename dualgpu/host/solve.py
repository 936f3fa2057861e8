"""Linear solves of host duals: ``np.linalg.solve`` and ``np.linalg.inv``.

Hand-written: neither is elementwise. With ``x = solve(A, b)``, differentiating ``A x = b``
gives ``A dx = db - dA x``: every lane is one more right-hand side of the same matrix, so
all N lanes cost one more solve with N (or N k) columns. ``inv(A)`` has the partials
``-inv(A) dA inv(A)``. The values are numpy's own answer, bit for bit; a singular matrix
raises numpy's ``LinAlgError`` as it does without duals.

Single matrices only (``A`` of shape (n, n)); stacks of matrices are refused with the fix.
"""
import numpy as np

from dualgpu.errors import DualgpuError
from dualgpu.host.operands import common_lanes, registrar, split, wrap

__all__ = ["FUNCTIONS"]

#: numpy function -> implementation, read by :mod:`dualgpu.host.protocol`.
FUNCTIONS = {}
implements = registrar(FUNCTIONS)


def _square(fname, a):
    if np.ndim(a) != 2 or a.shape[0] != a.shape[1]:
        raise DualgpuError(
            f"{fname} on duals takes one square matrix (n, n); got shape {np.shape(a)}. "
            "Fix: loop over a stack of matrices in Python, one matrix per call."
        )


@implements(np.linalg.solve)
def solve(a, b):
    """Return ``np.linalg.solve(a, b)``: ``b`` of shape (n,) or (n, k); ``a`` or ``b`` dual."""
    (av, ap), (bv, bp) = split(a, "numpy.linalg.solve matrix"), split(b, "numpy.linalg.solve "
                                                                         "right-hand side")
    av, bv = np.asarray(av), np.asarray(bv)
    _square("numpy.linalg.solve", av)
    if bv.ndim not in (1, 2) or bv.shape[0] != av.shape[0]:
        raise DualgpuError(
            f"numpy.linalg.solve on duals takes a right-hand side of shape ({av.shape[0]},) or "
            f"({av.shape[0]}, k) for a matrix of shape {av.shape}; got {bv.shape}."
        )
    lanes = common_lanes([ap, bp], "numpy.linalg.solve")
    x = np.linalg.solve(av, bv)
    if not lanes:
        return wrap(x, None)
    rhs = np.zeros((lanes,) + x.shape, x.dtype)
    if bp is not None:
        rhs += bp
    if ap is not None:
        rhs -= np.matmul(ap, x)  # (N, n, n) @ x: each lane's dA x
    n = av.shape[0]
    columns = np.moveaxis(rhs, 0, 1).reshape(n, -1)  # (n, N) or (n, N * k): one solve
    dx = np.moveaxis(np.linalg.solve(av, columns).reshape((n, lanes) + x.shape[1:]), 1, 0)
    return wrap(x, dx.astype(x.dtype, copy=False))


@implements(np.linalg.inv)
def inv(a):
    """Return ``np.linalg.inv(a)`` of one square dual matrix."""
    av, ap = split(a, "numpy.linalg.inv matrix")
    av = np.asarray(av)
    _square("numpy.linalg.inv", av)
    result = np.linalg.inv(av)
    if ap is None:
        return wrap(result, None)
    partials = -np.matmul(np.matmul(result, ap), result)  # (n, n) @ (N, n, n) @ (n, n)
    return wrap(result, partials.astype(result.dtype, copy=False))
