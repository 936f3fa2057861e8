"""``a % b`` in cpu-backend kernels: no integer division where the result is ``a`` itself.

Periodic stencils index with ``(i - 1) % n`` and ``(i + 1) % n``. numba compiles an integer
``%`` to a division guarded against a zero divisor and against ``MIN % -1``, and LLVM never
moves a guarded signed division out of a loop: a 512² Gray-Scott step spent most of its time
in four ``idiv`` per cell, one launch loop over cells with the row's two recomputed each time.
The cpu backend compiles ``a % b`` in kernels and device functions as :func:`remainder`:
for two integers of the same signedness it returns ``a`` when ``0 <= a < b`` (then
``a % b == a`` whatever Python's rounding), a compare that LLVM moves out of loops and a
branch predicted right everywhere but at the wrap-around, and ``a % b`` otherwise. Floats,
duals and mixed signedness keep ``a % b`` as it is. The result, and its type, are those of
``a % b``.

Examples
--------
>>> from numba import njit
>>> f = njit(lambda a, b: remainder(a, b), error_model="numpy")   # as kernels compile
>>> [f(i, 5) for i in (-6, -1, 0, 4, 5, 11)] == [i % 5 for i in (-6, -1, 0, 4, 5, 11)]
True
>>> f(7, -3), f(-7, -3), f(3, 0)   # Python's rounding; numpy's error model: 0 for % 0
(-2, -1, 0)
"""
import operator

from numba import types
from numba.extending import overload

__all__ = ["remainder"]


def remainder(a, b):
    """``a % b`` as a cpu-backend kernel computes it (see the module docstring)."""
    return a % b


@overload(remainder, target="cpu")
def _ov_remainder(a, b):
    if (isinstance(a, types.Integer) and isinstance(b, types.Integer)
            and a.signed == b.signed):
        def impl(a, b):
            if a >= 0 and a < b:
                return a
            return a % b
        return impl
    return lambda a, b: operator.mod(a, b)
