"""``+ - * /`` of float64 Python duals, written out: the short path of :class:`~dualgpu.Dual`'s
operators (:func:`binary`).

The rule table's general path (:func:`dualgpu.core.dual.apply_rule`) evaluates each rule's
factors by name, casts every operand to the result dtype and builds the result through
``Dual.__init__``'s checks: 7-9 us per operation, where host code of a simulation does several
per time step. For untagged float64 duals and float64 or Python numbers, :func:`binary` computes
the same terms in the same order (``factor * lanes`` per dual operand, added in argument
order), bit for bit (a property test compares them): about 2 us. Anything else returns None
and takes the general path.
"""
import numpy as np

__all__ = ["binary"]

_F64 = np.dtype(np.float64)


def _operand(dual, a):
    """``(value, partials or None, weak)`` of an operand the short path takes, or None."""
    t = type(a)
    if t is dual:
        if a.tag or a.partials.dtype != _F64 or a.partials.ndim != 1:
            return None
        return float(a.value), a.partials, a.weak
    if t is float or (t is int and -2 ** 53 <= a <= 2 ** 53):
        return float(a), None, True
    if t is np.float64:
        return float(a), None, False
    return None


def binary(dual, name, a, b):
    """``a <op> b`` (``name``: add, sub, mul, truediv) as a ``dual``, or None where the
    general path must run (a zero divisor, float32, nested or tagged duals, different lane
    counts, ints beyond 2**53)."""
    left, right = _operand(dual, a), _operand(dual, b)
    if left is None or right is None:
        return None
    (x, pa, wa), (y, pb, wb) = left, right
    if pa is not None and pb is not None and pa.size != pb.size:
        return None
    # the terms as apply_rule adds them: factor * lanes per dual operand, in argument order
    if name == "add":
        ans, fa, fb = x + y, 1.0, 1.0
    elif name == "sub":
        ans, fa, fb = x - y, 1.0, -1.0
    elif name == "mul":
        ans, fa, fb = x * y, y, x
    else:
        if y == 0.0:
            return None
        ans = x / y
        fa, fb = 1.0 / y, -ans / y
    with np.errstate(all="ignore"):
        if pa is None:
            lanes = pb.copy() if name == "add" else (-pb if name == "sub" else fb * pb)
        elif pb is None:
            lanes = pa.copy() if name in ("add", "sub") else fa * pa
        else:
            left_term = pa if name in ("add", "sub") else fa * pa
            right_term = pb if name == "add" else (-pb if name == "sub" else fb * pb)
            lanes = left_term + right_term
    result = dual.__new__(dual)
    result.value, result.partials, result.tag, result.weak = _F64.type(ans), lanes, 0, wa and wb
    return result
