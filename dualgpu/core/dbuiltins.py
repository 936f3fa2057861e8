"""Dual-aware ``min`` and ``max`` for kernels run by the CUDA simulator.

Python's builtins return one of their arguments unchanged: ``min(d, 2.5)`` of a
float32 dual is that float32 dual, or the float 2.5. A compiled kernel applies
numba's typing instead: both give a float64 dual, whose partials come from the
operand chosen. The cudasim backend puts these in place of the builtins in a
kernel's globals, so simulated kernels compute what compiled ones do. Plain
numbers go to the builtins.

Examples
--------
>>> import numpy as np
>>> from dualgpu import Dual
>>> from dualgpu.core import dbuiltins
>>> d = Dual(np.float32(0.5), np.ones(1, np.float32))
>>> dbuiltins.min(d, 2.5).partials.tolist(), dbuiltins.max(d, 2.5).partials.tolist()
([1.0], [0.0])
"""
import builtins

from dualgpu.core.dual import Dual, apply_rule

__all__ = ["min", "max"]


def _fold(name, plain):
    def fn(*args, **kwargs):
        if kwargs or len(args) < 2 or not any(isinstance(a, Dual) for a in args):
            return plain(*args, **kwargs)
        result = args[0]
        for item in args[1:]:  # left to right, as compiled code folds min(a, b, c)
            if isinstance(result, Dual) or isinstance(item, Dual):
                result = apply_rule(name, result, item, primal=plain)
            else:
                result = plain(result, item)
        return result

    fn.__name__ = name
    fn.__doc__ = f"builtins.{name}, with numba's typing and partials for Dual arguments."
    return fn


min = _fold("min", builtins.min)  # noqa: A001 - stands in for the builtin inside kernels
max = _fold("max", builtins.max)  # noqa: A001
